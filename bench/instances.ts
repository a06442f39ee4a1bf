/**
 * Many instances (issue 15, part 4), `npm run bench -- instances`:
 * - the baseline: Redis Streams on a real 6-node Redis Cluster (3 masters, 3 replicas, AOF
 *   everysec; test/helpers/redis-cluster.ts), P streams, pipelined XADD, XREADGROUP + XACK;
 * - 3 `v-queue serve` instances on that cluster (the redis driver), a queue of P partitions,
 *   producers spread over the instances, an ordered consumer on each;
 * - 3 instances on ONE fs directory, beside ONE instance on one fs directory.
 * Every system moves the same numbered messages; the rounds are interleaved (a drift of the
 * machine falls on all alike) and each figure is the median; ratios are medians of each round's
 * ratio. A system that cannot run here (a branch not merged yet) says why in the table: no
 * figure is made up. VQ_BENCH_REPEATS sets the rounds, VQ_BENCH_INSTANCES_MESSAGES the messages,
 * VQ_BENCH_INSTANCES the systems (e.g. `fs-many,fs-one`), VQ_BENCH_INSTANCES_PROFILE=<dir> writes a
 * CPU profile of each v-queue process there (node --cpu-prof).
 */
import { spawnSync } from "node:child_process";
import { cpus, loadavg, totalmem } from "node:os";
import { startRedisCluster, type RedisCluster } from "../test/helpers/redis-cluster";
import { streamsOnCluster } from "./cluster-streams";
import { makeBatches, type Measured, type System, type Workload } from "./instances-workload";
import { vqueueInstances, type RunStorage } from "./serve-instances";
import { formatRate, formatTable, median, progress, removeDir, tempDir } from "./util";

const ROUNDS = Math.max(1, Number(process.env.VQ_BENCH_REPEATS) || 3);
// 1,000,000 messages: a run of 200,000 lasted under a second, and measured how fast fresh
// processes share a consumer's partitions (first messages 100-300 ms in) more than how fast they move messages.
const WORK: Workload = { messages: Number(process.env.VQ_BENCH_INSTANCES_MESSAGES) || 1_000_000, size: 100, partitions: 6, batch: 1000, producers: 6 };
const INSTANCES = 3;
const TARGETS = { vsStreams: 2, manyVsOne: 1 };
const SYSTEMS = ["streams", "cluster", "fs-many", "fs-leased", "fs-one"] as const;
/** The leased fs locks' lease in the `fs-leased` runs (what every write's fence check costs). */
const FS_LEASE_MS = 5000;
/** VQ_BENCH_INSTANCES=fs-many,fs-one measures only those (a quick look at one comparison). */
const PICKED: readonly string[] = pickedSystems(process.env.VQ_BENCH_INSTANCES);

/** The systems a `VQ_BENCH_INSTANCES` value names: a name that is none of them stops the bench, saying which are. */
function pickedSystems(value: string | undefined): readonly string[] {
  if (value === undefined) return SYSTEMS;
  const names = value
    .split(",")
    .map((name) => name.trim())
    .filter(Boolean);
  const unknown = names.filter((name) => !(SYSTEMS as readonly string[]).includes(name));
  if (names.length === 0 || unknown.length > 0)
    throw new Error(
      `VQ_BENCH_INSTANCES=${JSON.stringify(value)}: ${unknown.length > 0 ? `unknown ${unknown.join(", ")}` : "names nothing"}; use a comma-separated list of ${SYSTEMS.join(", ")}.`,
    );
  return names;
}

interface Entry {
  key: (typeof SYSTEMS)[number];
  label: string;
  system?: System;
  /** Why it has no figure (not set up, or a run failed). */
  missing?: string;
  runs: (Measured | undefined)[];
}

export async function runInstancesBench(): Promise<void> {
  console.log(
    `\n## Many instances (issue 15): ${WORK.messages} messages of ${WORK.size} B, ${WORK.partitions} partitions, batches of ${WORK.batch}, ${WORK.producers} producer loops, median of ${ROUNDS} interleaved rounds\n`,
  );
  console.log(machineFacts());
  const entries: Entry[] = [
    {
      key: "streams",
      label: `Redis Streams, ${WORK.partitions} streams, pipelined XADD; XREADGROUP COUNT ${WORK.batch} + XACK, a consumer per stream`,
      runs: [],
    },
    {
      key: "cluster",
      label: `v-queue, ${INSTANCES} x serve --storage redis+vq://...?cluster=1, P=${WORK.partitions}, binary produce, ordered consumer on each`,
      runs: [],
    },
    { key: "fs-many", label: `v-queue, ${INSTANCES} x serve on one fs directory, same`, runs: [] },
    { key: "fs-leased", label: `v-queue, ${INSTANCES} x serve on one fs directory, leased locks (fs:<dir>?lease=${FS_LEASE_MS}), same`, runs: [] },
    { key: "fs-one", label: "v-queue, 1 x serve on one fs directory, same", runs: [] },
  ];
  const get = (key: Entry["key"]) => entries.find((e) => e.key === key)!;
  for (const entry of entries) if (!PICKED.includes(entry.key)) entry.missing = `not picked (VQ_BENCH_INSTANCES=${PICKED.join(",")})`;
  let cluster: RedisCluster | undefined;
  try {
    if (!get("streams").missing || !get("cluster").missing) {
      progress("starting a 6-node Redis Cluster ...");
      cluster = await startRedisCluster().catch((error: Error) => {
        get("streams").missing = get("cluster").missing = `no Redis Cluster: ${error.message.split("\n")[0]}`;
        return undefined;
      });
    }
    if (cluster) await setUp(get("streams"), () => streamsOnCluster(cluster!, WORK));
    if (cluster) await setUp(get("cluster"), async () => vqueueInstances(get("cluster").label, INSTANCES, WORK, clusterStorage(cluster!)));
    await setUp(get("fs-many"), async () => vqueueInstances(get("fs-many").label, INSTANCES, WORK, () => fsStorage()));
    await setUp(get("fs-leased"), async () => vqueueInstances(get("fs-leased").label, INSTANCES, WORK, () => fsStorage(FS_LEASE_MS)));
    await setUp(get("fs-one"), async () => vqueueInstances(get("fs-one").label, 1, WORK, () => fsStorage()));

    for (let round = 0; round < ROUNDS; round++) {
      const batches = makeBatches(WORK);
      // Alternating the order: no system always runs right after the same one.
      for (const entry of round % 2 ? [...entries].reverse() : entries) {
        if (!entry.system) continue;
        progress(`round ${round + 1}/${ROUNDS}: ${entry.key} ...`);
        try {
          entry.runs[round] = await entry.system.run(round, batches);
        } catch (error) {
          // Said in the table; the system sits out the next rounds (a broken run would fail again).
          entry.missing = `a run failed: ${(error as Error).message.split("\n")[0]}`;
          progress(`${entry.key}: ${entry.missing}`);
          await entry.system.close();
          entry.system = undefined;
        }
      }
    }
  } finally {
    for (const entry of entries) await entry.system?.close().catch(() => {});
    await cluster?.stop();
  }
  printTable(entries);
}

async function setUp(entry: Entry, make: () => Promise<System>): Promise<void> {
  if (entry.missing) return;
  try {
    entry.system = await make();
  } catch (error) {
    entry.missing = (error as Error).message.split("\n")[0];
    progress(`${entry.key} not measured: ${entry.missing}`);
  }
}

/** A fresh fs directory per run; with `leaseMs`, its locks leased. */
async function fsStorage(leaseMs?: number): Promise<RunStorage> {
  const dir = tempDir("instances");
  return { config: leaseMs === undefined ? { dir } : { storage: `fs:${dir}?lease=${leaseMs}` }, dispose: async () => removeDir(dir) };
}

/** The redis driver on the cluster (`redis+vq://...?cluster=1`, one node named), a fresh key prefix per run. */
function clusterStorage(cluster: RedisCluster): (round: number) => Promise<RunStorage> {
  let run = 0;
  const node = cluster.startupNodes[0]!;
  return async () => ({ config: { storage: `redis+vq://${node.host}:${node.port}/0?cluster=1&prefix=bench${run++}` }, dispose: async () => {} });
}

// --- Output ---

function printTable(entries: Entry[]): void {
  const rates = (e: Entry, what: "produce" | "consume") => e.runs.map((r) => (r?.[what] ? WORK.messages / r[what] : Number.NaN));
  /** Why `what` has no figure in any round of `e`, if so. */
  const whyNot = (e: Entry, what: "produce" | "consume") =>
    rates(e, what).some(Number.isFinite) ? undefined : (e.missing ?? e.runs.find((r) => r?.consumeFailed)?.consumeFailed ?? "no run");
  /** The median over rounds of a/b, each round's pair run side by side. */
  const paired = (a: Entry, b: Entry, what: "produce" | "consume") => {
    const ra = rates(a, what);
    const rb = rates(b, what);
    return median(ra.map((x, i) => x / rb[i]!).filter(Number.isFinite));
  };
  const streams = entries.find((e) => e.key === "streams")!;
  const one = entries.find((e) => e.key === "fs-one")!;
  const rows: string[][] = [];
  for (const e of entries) {
    for (const what of ["produce", "consume"] as const) {
      const why = whyNot(e, what);
      if (why) {
        rows.push([e.label, what, "not measured", "-", "-", "-", why]);
        continue;
      }
      const runs = rates(e, what).filter(Number.isFinite);
      const spread = `${formatRate(Math.min(...runs))}-${formatRate(Math.max(...runs))}`;
      let ratio = "-";
      let verdict = e.key === "streams" || e.key === "fs-one" ? "baseline" : "";
      const against = e.key === "cluster" ? streams : e.key === "fs-many" || e.key === "fs-leased" ? one : undefined;
      const againstWhy = against && whyNot(against, what);
      if (against && !againstWhy) {
        const r = paired(e, against, what);
        const target = e.key === "cluster" ? TARGETS.vsStreams : TARGETS.manyVsOne;
        ratio = `${r.toFixed(2)}x ${e.key === "cluster" ? "Redis Streams" : "1 instance"}`;
        verdict = `>= ${target}x: ${r >= target ? "PASS" : "FAIL"}`;
      } else if (against) verdict = `no baseline (${againstWhy})`;
      const extra = e.runs.filter((r): r is Measured => r !== undefined);
      const dup = what === "consume" ? extra.reduce((a, r) => a + r.duplicates, 0) : 0;
      const retried = new Map<string, number>();
      for (const r of extra) for (const [key, n] of Object.entries(r.retried[what])) retried.set(key, (retried.get(key) ?? 0) + n);
      const several = what === "consume" ? extra.filter((r) => r.split && r.split.length > 1) : [];
      const splits = several.map((r) => r.split!.map((n) => `${Math.round((100 * n) / WORK.messages)}`).join("/"));
      const firsts = several.map((r) => r.firstMs!.map((ms) => ms.toFixed(0)).join("/"));
      const empty = what === "consume" ? extra.reduce((a, r) => a + (r.emptyPolls ?? 0), 0) : 0;
      const full = what === "consume" ? extra.reduce((a, r) => a + (r.fullPolls ?? 0), 0) : 0;
      const failed = what === "consume" ? extra.filter((r) => r.consumeFailed) : [];
      const cpu = extra.map((r) => r.serverCpuMs?.[what]).filter((ms): ms is number => ms !== undefined);
      const cpuNote = cpu.length ? `server CPU ${((median(cpu) / WORK.messages) * 1000).toFixed(1)} ms per 1000` : "";
      const notes = [
        cpuNote,
        splits.length ? `% per instance ${splits.join(", ")}; first message after ${firsts.join(", ")} ms` : "",
        full ? `${Math.round((extra.length * WORK.messages) / full)} messages per answer` : "",
        empty ? `${empty} empty polls` : "",
        dup ? `${dup} redelivered` : "",
        retried.size ? `retried: ${[...retried].map(([key, n]) => `${n} x ${key}`).join(", ")}` : "",
        failed.length ? `${failed.length} round(s) failed: ${failed[0]!.consumeFailed}` : "",
        e.missing ?? "",
      ]
        .filter(Boolean)
        .join(", ");
      rows.push([e.label, what, formatRate(median(runs)), spread, ratio, verdict, notes]);
    }
  }
  console.log(formatTable(["system", "", "msgs/s", "runs (min-max)", "ratio (median of rounds)", "target", "notes"], rows));
  console.log(
    `\nProduce: from the first request to the last acknowledgement; consume: from the first read to the last commit, every message seen (counted by its number). v-queue servers: durability "interval", syncCommits false; each run fresh instances on fresh storage.`,
  );
}

function machineFacts(): string {
  const redis = spawnSync("redis-server", ["--version"], { encoding: "utf8" }).stdout?.match(/v=(\S+)/)?.[1] ?? "missing";
  const cpu = cpus();
  return (
    `Machine: ${cpu.length} cores (${cpu[0]?.model ?? "?"}), ${(totalmem() / 2 ** 30).toFixed(0)} GiB, Node ${process.version}, redis-server ${redis}, load average ${loadavg()[0]!.toFixed(2)} at the start. ` +
    `The ${INSTANCES} instances, the 6 Redis nodes and this client share these cores: that favours nobody.` +
    (loadavg()[0]! > cpu.length / 2 ? ` The machine is busy with other work: expect the figures to move; the ratios of each round hold better.\n` : "\n")
  );
}
