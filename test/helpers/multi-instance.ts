// Over 300 lines: the chaos harness (instances, traffic, the chaos loop, the checks) shared by
// the fs and Redis Cluster runs; its parts share the run's bookkeeping.
/**
 * The harness of the many-instances chaos tests (test/instances/multi-instance.test.ts on one directory,
 * test/instances/redis-cluster-instances.test.ts on a Redis Cluster): `v-queue serve` processes of the
 * built CLI, producers with keys and idempotency keys that retry until answered 2xx, ordered and
 * shared consumers on every instance, the kill/pause loop, and the checks after the run.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { appendFileSync } from "node:fs";
import { expect } from "vitest";
import { browseMessages } from "../../src/inspect/browse";
import type { QueueDriver } from "../../src/core/driver";
import type { QueueProblem } from "../../src/core/errors";
import { inspectQueue } from "../../src/inspect/queues";
import { partitionName } from "../../src/partitions/declaration";
import { BIN } from "../cli/_cli";
import { freePort } from "./net";
import { pinnedFetch } from "./pinned-fetch";
import { parseScrape, valueOf } from "./prometheus";
import { scriptCommand, type Runtime } from "./runtime";
import { sleep } from "./sleep";

/** The settings every chaos run shares: the same run on each setup. */
export const CHAOS = {
  /**
   * How long the kills and pauses go on at least: the short run (CI) stops once every instance
   * was killed and paused (`chaosLoop`); `VQ_SOAK=1` goes on for 2 minutes.
   */
  runMs: process.env.VQ_SOAK === "1" ? 120_000 : 0,
  /** The run's length in test titles. */
  runName: process.env.VQ_SOAK === "1" ? "2 min" : "each instance killed and paused",
  instances: 3,
  partitions: 6,
  queue: "events",
  /** The lock lease of the leased runs: a SIGSTOP of twice this lets another instance take the partitions over. */
  leaseMs: 2000,
  /** Produces sent at once to an instance just before it is paused, and to the next one while it is. */
  burst: 60,
} as const;

export interface Instance {
  /** Its API's base URL (`<url>/health`, `<url>/api/v1/...`, `<url>/metrics`). */
  url: string;
  /** Stale-writer refusals counted by the instance's earlier processes (read from /metrics before each SIGKILL). */
  fencedBefore: StaleWriterCounts;
  /** SIGKILL, then wait until it (or its replacement) serves again. */
  restart(): Promise<void>;
  kill(signal: NodeJS.Signals): void;
  /** This process's stale-writer refusals so far; undefined when it does not answer. */
  fencedWrites(): Promise<StaleWriterCounts | undefined>;
  /** Its process's id now (undefined while none runs). */
  pid?(): number | undefined;
}

/**
 * Stale writers stopped: writes the storage's fence refused (`vqueue_fenced_writes_total`: a
 * write sent before its lock was taken over, landing after), and writer locks lost to another
 * instance (`vqueue_writer_locks_lost_total`: found by a renewal after a pause, a check before a
 * write, or a refused write), after which the writer acknowledges nothing.
 */
export interface StaleWriterCounts {
  storage: number;
  lease: number;
}

/** A `v-queue serve` process, started (again) by the test. */
export interface ServeInstance extends Instance {
  child?: ChildProcess;
  /** Starts it (after a kill) and waits for /health. */
  start(): Promise<void>;
}

/** Starts `v-queue serve <storageArgs> --port <free>` (on Node unless told) and waits for /health. */
export async function startInstance(storageArgs: string[], runtime: Runtime = "node"): Promise<ServeInstance> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const start = async () => {
    const { command, args } = scriptCommand(
      BIN,
      ["serve", ...storageArgs, "--port", String(port), "--log-level", process.env.VQ_INSTANCE_LOG ? "warn" : "error"],
      runtime,
    );
    const started = spawn(command, args, { stdio: ["ignore", "ignore", "pipe"] });
    instance.child = started;
    let output = "";
    started.stderr!.on("data", (d) => (output += d));
    // VQ_INSTANCE_LOG=<file>: every instance's warnings and errors, to find what a chaos run did.
    if (process.env.VQ_INSTANCE_LOG) started.stderr!.on("data", (d) => appendFileSync(process.env.VQ_INSTANCE_LOG!, `[${port} ${started.pid}] ${d}`));
    const deadline = Date.now() + 30_000;
    for (;;) {
      if (started.exitCode !== null) throw new Error(`instance exited: ${output}`);
      if (
        await fetch(`${url}/health`).then(
          (r) => r.ok,
          () => false,
        )
      )
        return;
      if (Date.now() > deadline) throw new Error(`instance did not start: ${output}`);
      await sleep(50);
    }
  };
  const instance: ServeInstance = {
    url,
    fencedBefore: { storage: 0, lease: 0 },
    start,
    async restart() {
      const exited = new Promise((r) => instance.child!.once("exit", r));
      instance.kill("SIGKILL");
      await exited;
      await start();
    },
    kill(signal) {
      const { child } = instance;
      if (child && child.exitCode === null && child.signalCode === null) child.kill(signal);
    },
    fencedWrites: async () => staleWriterCounts(await call(`${url}/metrics`, {}, 3000)),
    pid: () => instance.child?.pid,
  };
  await start();
  return instance;
}

/** The stale-writer counters of a /metrics answer; undefined when there was none. */
export async function staleWriterCounts(res: Response | undefined): Promise<StaleWriterCounts | undefined> {
  if (!res?.ok) return undefined;
  const families = parseScrape(await res.text());
  return { storage: valueOf(families, "vqueue_fenced_writes_total") ?? 0, lease: valueOf(families, "vqueue_writer_locks_lost_total") ?? 0 };
}

/** A request that may meet a dead or paused instance: undefined on a network error or timeout. */
export async function call(url: string, init: RequestInit = {}, timeoutMs = 5000, via: typeof fetch = fetch): Promise<Response | undefined> {
  try {
    return await via(url, { ...init, signal: AbortSignal.timeout(timeoutMs) });
  } catch {
    return undefined;
  }
}

export interface TrafficOptions {
  queue: string;
  /** Producer loops per instance, each with its own keys (a key's messages go one after another: their order is known). */
  producers: number;
  keysPerProducer: number;
  /** How long a produce may take before it is retried elsewhere. @default 5000 */
  produceTimeoutMs?: number;
  /**
   * Instances behind one port (`node-cluster` workers): each ordered consumer loop is a consumer
   * of its own (`ord<i>`, each of which must get every message, each key in order) on one
   * kept-alive connection. Loops sharing `ord` there could poll one worker at once: each gets its
   * own batch, handed out in order, but they finish in any order, so a key's order would not show.
   */
  pinOrdered?: boolean;
  /** Whether each produce names its key as the partition key (a partitioned queue); an ordinary queue keeps every key's order in its one log. @default true */
  partitionKeys?: boolean;
}

/** The queues that hold a queue's messages: its partitions (`p<k>`), or the queue itself (0 partitions: an ordinary queue, labelled ""). */
export function storedQueues(queue: string, partitions: number): { label: string; name: string }[] {
  if (partitions === 0) return [{ label: "", name: queue }];
  return Array.from({ length: partitions }, (_, p) => ({ label: `p${p}`, name: partitionName(queue, p) }));
}

/**
 * Producers and consumers (ordered `ord`, or `ord<i>` with `pinOrdered`; shared `work`) on every instance, until stopped.
 * A produce is retried with the same idempotency key, on the next instance, until answered 2xx.
 */
export function startTraffic(instances: Instance[], options: TrafficOptions) {
  const { queue } = options;
  let producing = true;
  let consuming = true;
  /** Every message answered 2xx: key -> its numbers in produce order. */
  const acked = new Map<string, number[]>();
  /** Each ordered consume, per consumer and key (`<consumer>/<key>`), the numbers in the order they came (duplicates included). */
  const ordered = new Map<string, number[]>();
  const orderedNames = options.pinOrdered ? instances.map((_, i) => `ord${i}`) : ["ord"];
  const shared = new Set<string>();
  /** Messages a worker got whose ack was answered 5xx (it may have been written): delivered, but never acked for sure. */
  const ambiguous = new Set<string>();
  /** Every lease the shared consumers got, by position ("p<k>:<part>.<offset>"): what came, from where, and how its ack was answered. */
  const leases = new Map<string, string[]>();
  const noteLease = (token: string, note: string) => {
    const at = token.split(".").slice(0, 2).join(".");
    leases.set(at, [...(leases.get(at) ?? []), note]);
  };
  const counts = {
    retries: 0,
    orderedErrors: 0,
    commitRetries: 0,
    commitStatuses: {} as Record<string, number>,
    fencedAnswers: 0,
    ambiguousAcks: 0,
    statuses: {} as Record<string, number>,
    /** 409 answers, by what was asked and their code (`produce E_LOCKED`; `burst`: a produce of a `burst`): a client retrying as the SDK does is never shown one. */
    conflicts: {} as Record<string, number>,
    /** Answers of any status to the traffic's requests. */
    answers: 0,
  };
  /** A request of the traffic (see `call`), its answer counted. */
  const ask: typeof call = async (...args) => {
    const res = await call(...args);
    if (res) counts.answers++;
    return res;
  };
  /** Reads a refused answer (or an empty one) through, counting a 409 in `conflicts`. */
  const readRefused = async (what: string, res: Response | undefined) => {
    const text = (await res?.text()) ?? "";
    if (res?.status === 409) {
      const key = `${what} ${errorCode(text)}`;
      counts.conflicts[key] = (counts.conflicts[key] ?? 0) + 1;
      if (process.env.VQ_DEBUG_CONFLICTS) console.log(`${new Date().toISOString()} ${what} answered 409: ${text}`);
    }
    return text;
  };
  const json = { "content-type": "application/json" };

  /** Produces `key:number` (idempotency key the same), first on `instance` then on the next ones, until answered 2xx: the instance that answered it. */
  const produce = async (key: string, number: number, instance: number, what = "produce"): Promise<number> => {
    const body = JSON.stringify({ message: `${key}:${number}` });
    let answeredBy: number;
    for (let attempt = 0; ; attempt++) {
      answeredBy = (instance + attempt) % instances.length;
      const target = instances[answeredBy]!;
      const res = await ask(
        `${target.url}/api/v1/queues/${queue}/messages`,
        {
          method: "POST",
          body,
          headers: { ...json, ...(options.partitionKeys === false ? {} : { "partition-key": key }), "idempotency-key": `${key}:${number}` },
        },
        options.produceTimeoutMs,
      );
      if (res?.ok) {
        await res.arrayBuffer();
        break;
      }
      const text = await readRefused(what, res);
      if (res && res.status < 500 && res.status !== 409) throw new Error(`produce answered ${res.status}: ${text}`);
      const code = res ? errorCode(text) || String(res.status) : "no answer";
      counts.statuses[code] = (counts.statuses[code] ?? 0) + 1;
      if (code === "E_FENCED") counts.fencedAnswers++;
      counts.retries++;
      await sleep(20 + Math.random() * 50);
    }
    let list = acked.get(key);
    if (!list) acked.set(key, (list = []));
    list.push(number);
    return answeredBy;
  };

  const producer = async (instance: number, loop: number) => {
    const keys = Array.from({ length: options.keysPerProducer }, (_, k) => `i${instance}-l${loop}-k${k}`);
    for (let n = 0; producing; n++) await produce(keys[n % keys.length]!, Math.floor(n / keys.length), instance);
  };
  const bursts: Promise<number>[] = [];

  const orderedConsumer = async (instance: number) => {
    const via = options.pinOrdered ? pinnedFetch() : fetch;
    const name = orderedNames[options.pinOrdered ? instance : 0]!;
    let rewind = false;
    while (consuming) {
      const url = instances[instance]!.url;
      // After a consume that got no answer (the instance paused or killed while answering), the
      // messages it read may be handed out to nobody: rewind first, as the API asks (and the
      // client's subscribe does). Retried until answered: the next consume must not skip them.
      if (rewind) {
        const rewound = await ask(`${url}/api/v1/queues/${queue}/consumers/${name}/rewind`, { method: "POST" }, 3000, via);
        await readRefused("rewind", rewound);
        if (!rewound?.ok) {
          await sleep(50);
          continue;
        }
        rewind = false;
      }
      const res = await ask(`${url}/api/v1/queues/${queue}/consumers/${name}/messages?max_messages=200&timeout_ms=500`, {}, 3000, via);
      if (!res?.ok) {
        await readRefused("consume", res);
        counts.orderedErrors++;
        // No such queue yet (an ordinary queue is made by its first produce): nothing was read, nothing to rewind.
        rewind = res?.status !== 404;
        await sleep(50);
        continue;
      }
      const body = (await res.json()) as { cursor: string | null; messages: { data: string }[] };
      for (const m of body.messages) {
        const [key, number] = m.data.split(":");
        let list = ordered.get(`${name}/${key}`);
        if (!list) ordered.set(`${name}/${key}`, (list = []));
        list.push(Number(number));
      }
      // A commit that got no answer (a 5xx, a 409 E_LOCKED) is sent again: commits only move forward, and the
      // instance holding its partition may be another one than the one that took it (which went
      // away meanwhile), still reading on past it, so nothing would come again to commit it later.
      while (body.cursor && consuming) {
        const committed = await ask(
          `${url}/api/v1/queues/${queue}/consumers/${name}/commit`,
          { method: "POST", body: JSON.stringify({ cursor: body.cursor }), headers: json },
          3000,
          via,
        );
        const text = await readRefused("commit", committed);
        if (committed && !committed.ok) {
          const code = `${committed.status} ${errorCode(text)}`;
          counts.commitStatuses[code] = (counts.commitStatuses[code] ?? 0) + 1;
          if (process.env.VQ_DEBUG_COMMITS) console.log(`commit ${body.cursor} -> ${committed.status} ${text}`);
        }
        if (committed && committed.status < 500 && committed.status !== 409) break;
        counts.commitRetries++;
        await sleep(50);
      }
    }
  };

  const sharedConsumer = async (instance: number) => {
    while (consuming) {
      const url = instances[instance]!.url;
      const res = await ask(
        `${url}/api/v1/queues/${queue}/consumers/work/lease`,
        { method: "POST", body: JSON.stringify({ max: 100, timeoutMs: 500 }), headers: json },
        3000,
      );
      if (!res?.ok) {
        await readRefused("lease", res);
        await sleep(50);
        continue;
      }
      const body = (await res.json()) as { messages: { data: string; lease: string }[] };
      if (body.messages.length === 0) continue;
      for (const m of body.messages) noteLease(m.lease, `${m.data} leased ${m.lease.split(".")[2]} from i${instance} at ${Date.now() - startedAt} ms`);
      // Acked where it was leased, or (one time in three) on another instance, as a load
      // balancer would send it: an ack is taken anywhere (through the partition's ack inbox).
      const acker = Math.random() < 1 / 3 ? (instance + 1 + Math.floor(Math.random() * (instances.length - 1))) % instances.length : instance;
      const ack = await ask(
        `${instances[acker]!.url}/api/v1/queues/${queue}/consumers/work/ack`,
        { method: "POST", body: JSON.stringify({ leases: body.messages.map((m) => m.lease) }), headers: json },
        3000,
      );
      const answered = ack ? `${ack.status}` : "no answer";
      for (const m of body.messages) noteLease(m.lease, `ack of ${m.lease.split(".")[2]} at i${acker}: ${answered}`);
      // Unanswered (the instance was killed or paused): the ack may have landed before, so the
      // messages may never come again, yet they did reach this consumer: delivered.
      if (!ack) {
        for (const m of body.messages) shared.add(m.data);
        continue;
      }
      if (!ack.ok) {
        await readRefused("ack", ack);
        // A storage failure (5xx): the ack may have been written all the same (Redis took it,
        // its WAIT for a replica failed), and then the messages never come again; this worker
        // did get them. Refused otherwise (4xx): they come again.
        if (ack.status >= 500) {
          counts.ambiguousAcks++;
          for (const m of body.messages) ambiguous.add(m.data);
        }
        continue;
      }
      // An error item is a lease that ran out or moved: that message comes again.
      // An error item is not acknowledged (it comes again), but an E_IO one may have been written,
      // and an E_PENDING one (its holder did not decide in time) may be applied later.
      const { errors } = (await ack.json()) as { errors: { lease: string; code: string }[] };
      const refused = new Map(errors.map((e) => [e.lease, e.code]));
      for (const m of body.messages) {
        if (refused.has(m.lease)) noteLease(m.lease, `  refused: ${refused.get(m.lease)}`);
        if (!refused.has(m.lease)) shared.add(m.data);
        else if (refused.get(m.lease) === "E_IO" || refused.get(m.lease) === "E_PENDING") ambiguous.add(m.data);
      }
    }
  };

  const startedAt = Date.now();
  const producers = instances.flatMap((_, i) => Array.from({ length: options.producers }, (_, l) => producer(i, l)));
  const consumers = instances.flatMap((_, i) => [orderedConsumer(i), sharedConsumer(i)]);
  const expected = () => [...acked].flatMap(([key, numbers]) => numbers.map((n) => `${key}:${n}`));
  return {
    acked,
    ordered,
    shared,
    counts,
    expected,
    /** Messages acknowledged that an ordered consumer never got, as `<consumer>/<message>`. */
    missingOrdered: () =>
      orderedNames.flatMap((name) =>
        expected().flatMap((m) => (ordered.get(`${name}/${m.split(":")[0]}`)?.includes(Number(m.split(":")[1])) ? [] : [`${name}/${m}`])),
      ),
    missingShared: () => expected().filter((m) => !shared.has(m) && !ambiguous.has(m)),
    /** What the shared consumers got at a position ("p<k>:<part>.<offset>"), to tell why a message is missing. */
    leasesAt: (at: string) => leases.get(at) ?? [],
    /** Messages the shared consumer delivered only with an ack answered 5xx (never acked for sure, never handed out again). */
    onlyAmbiguous: () => expected().filter((m) => !shared.has(m) && ambiguous.has(m)),
    /**
     * `count` produces at once to `instance`, each of its own key (`burst<n>-<i>`), retried like
     * the others: an instance that is busy writing when it is paused has writes in flight.
     * Resolves true once `instance` itself answered one of them 2xx (it held the writer then),
     * false when every one was answered elsewhere.
     */
    burst(instance: number, count: number): Promise<boolean> {
      const name = `burst${bursts.length}`;
      const sent = Array.from({ length: count }, (_, i) => produce(`${name}-${i}`, 0, instance, "burst"));
      bursts.push(...sent);
      return Promise.race([
        ...sent.map((answered) => answered.then((by) => (by === instance ? true : new Promise<never>(() => {})))),
        Promise.all(sent).then((by) => by.includes(instance)),
      ]);
    },
    async stopProducing() {
      producing = false;
      await Promise.all([...producers, ...bursts]);
    },
    async stopConsuming() {
      consuming = false;
      await Promise.all(consumers);
    },
  };
}

export type Traffic = ReturnType<typeof startTraffic>;

/** An error answer's code (`E_LOCKED`), or "" when its body says none. */
function errorCode(text: string): string {
  try {
    return (JSON.parse(text) as { error?: { code?: string } }).error?.code ?? "";
  } catch {
    return "";
  }
}

/**
 * A `beforePause` that makes a pause meet stale writers: `count` keyed produces to the instance
 * just before it is paused (writes in flight when it stops: fenced when it runs again), then,
 * while it is paused, as many to the next instance, whose keys ask for the partitions the paused
 * one holds (taken over once its lease runs out: its lock is found lost when it runs again).
 * On an ordinary queue (`partitions` 0) the instance must first be handed the queue's one writer
 * (a request, then the holder's batch in flight): the first burst waits (up to 5 s) until the
 * instance holds it, then a second burst is sent just before the pause. It holds it once it
 * answered one of the burst's produces itself, or, behind one port (node-cluster workers: any
 * worker may answer), once `holdsWriter` says so.
 */
export function busyThenWanted(traffic: Traffic, instances: number, count: number, partitions: number, holdsWriter?: (instance: number) => Promise<boolean>) {
  return async (instance: number) => {
    const answeredHere = traffic.burst(instance, count);
    if (partitions === 0) {
      const holds = holdsWriter ? untilTrue(() => holdsWriter(instance), 5000) : answeredHere;
      await Promise.race([holds, sleep(5000)]);
      void traffic.burst(instance, count);
    }
    setTimeout(() => void traffic.burst((instance + 1) % instances, count), 200);
    if (partitions > 0) await sleep(30);
  };
}

/** Resolves true once `check` does (asked every 10 ms), false after `timeoutMs`. */
async function untilTrue(check: () => Promise<boolean>, timeoutMs: number): Promise<boolean> {
  for (const deadline = Date.now() + timeoutMs; Date.now() < deadline; await sleep(10)) if (await check()) return true;
  return false;
}

export interface ChaosOptions {
  runMs: number;
  /** How long a SIGSTOPped instance stays stopped. */
  pauseMs: number;
  /** Called just before an instance is SIGSTOPped (with its index): to make it busy, say. */
  beforePause?: (instance: number) => Promise<void>;
  /** Read each instance's fenced-writes counter from /metrics before it is killed (see `totalFencedWrites`). */
  countFenced?: boolean;
}

/**
 * Every 2 s, the next instance in turn is SIGKILLed and restarted or SIGSTOPped for `pauseMs`:
 * kills and pauses alternate, and swap at each turn of the instances, so that after 2 turns every
 * instance was killed once and paused once (with 3: kill 0, pause 1, kill 2, pause 0, kill 1,
 * pause 2). With `countFenced`, the instance's fenced-writes counter is read before each kill.
 * It runs for `runMs` and at least those 2 turns: a loaded machine makes rounds slower, never fewer.
 */
export async function chaosLoop(instances: Instance[], options: ChaosOptions) {
  /** `kills` and `pauses` in all; `killed` and `paused`: each instance's. */
  const done = { kills: 0, pauses: 0, killed: instances.map(() => 0), paused: instances.map(() => 0) };
  const end = Date.now() + options.runMs;
  const minRounds = 2 * instances.length;
  for (let round = 0; Date.now() < end || round < minRounds; round++) {
    await sleep(2000);
    const index = round % instances.length;
    const instance = instances[index]!;
    if ((index + Math.floor(round / instances.length)) % 2 === 1) {
      await options.beforePause?.(index);
      if (process.env.VQ_DEBUG_CONFLICTS) console.log(`${new Date().toISOString()} pause i${index}`);
      instance.kill("SIGSTOP");
      done.pauses++;
      done.paused[index]!++;
      await sleep(options.pauseMs);
      instance.kill("SIGCONT");
    } else {
      if (options.countFenced) instance.fencedBefore = addCounts(instance.fencedBefore, await instance.fencedWrites());
      if (process.env.VQ_DEBUG_CONFLICTS) console.log(`${new Date().toISOString()} kill i${index}`);
      done.kills++;
      done.killed[index]!++;
      await instance.restart();
    }
  }
  return done;
}

/**
 * No 409 reaches a client that retries as the SDK does: each is `E_LOCKED`, which the SDK retries
 * (a holder paused, killed, or owed acks for what it handed out did not hand the writer or consumer
 * over within handoffTimeoutMs), and, but for the bursts' (sent at once at a holder about to be
 * paused: 60 may wait out handoffTimeoutMs together, with a Redis failover on top), they are fewer
 * than a tenth of the answers. When an instance not holding an ordinary queue's writer or consumer
 * answered 409 at once (before every instance served it), they were nearly half the answers.
 */
export function expectFewConflicts(traffic: Traffic): void {
  const { conflicts } = traffic.counts;
  expect(Object.keys(conflicts).filter((key) => !key.endsWith(" E_LOCKED"))).toEqual([]);
  const total = Object.entries(conflicts).reduce((sum, [key, n]) => (key.startsWith("burst ") ? sum : sum + n), 0);
  expect(total, `409s answered: ${JSON.stringify(conflicts)} of ${traffic.counts.answers} answers`).toBeLessThan(traffic.counts.answers / 10);
}

/** Every instance met both faults: it was killed and restarted, and it was paused. */
export function expectEveryInstanceKilledAndPaused({ killed, paused }: { killed: number[]; paused: number[] }): void {
  expect({ killed: killed.map((n) => n > 0), paused: paused.map((n) => n > 0) }).toEqual({ killed: killed.map(() => true), paused: paused.map(() => true) });
}

/** Stale-writer refusals counted by every instance over the run (their processes alive now included). */
export async function totalFencedWrites(instances: Instance[]): Promise<StaleWriterCounts> {
  let total: StaleWriterCounts = { storage: 0, lease: 0 };
  for (const instance of instances) total = addCounts(addCounts(total, instance.fencedBefore), await instance.fencedWrites());
  return total;
}

function addCounts(a: StaleWriterCounts, b: StaleWriterCounts | undefined): StaleWriterCounts {
  return { storage: a.storage + (b?.storage ?? 0), lease: a.lease + (b?.lease ?? 0) };
}

/** The sum of the lags of every consumer of every partition (0 partitions: of the ordinary queue), as the storage says. */
export async function totalLag(driver: QueueDriver, queue: string, partitions: number): Promise<number> {
  let total = 0;
  for (const { name } of storedQueues(queue, partitions)) {
    const stats = await inspectQueue(driver, name);
    total += stats?.consumers.reduce((sum, c) => sum + c.lag, 0) ?? 0;
  }
  return total;
}

/** Each partition's consumers whose lag is not 0: `p<k> <consumer>` -> its lag, as the storage says. */
export async function lagsByPartition(driver: QueueDriver, queue: string, partitions: number): Promise<Record<string, number>> {
  const lags: Record<string, number> = {};
  for (const { label, name } of storedQueues(queue, partitions)) {
    const stats = await inspectQueue(driver, name);
    for (const c of stats?.consumers ?? []) if (c.lag > 0) lags[`${label} ${c.name}`.trim()] = c.lag;
  }
  return lags;
}

/** Waits (up to `timeoutMs`) until both consumers have every acknowledged message and the lags are 0. */
export async function settle(traffic: Traffic, driver: QueueDriver, queue: string, partitions: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while ((traffic.missingOrdered().length > 0 || traffic.missingShared().length > 0) && Date.now() < deadline) await sleep(250);
  // The commits of the last batches land.
  while ((await totalLag(driver, queue, partitions)) > 0 && Date.now() < deadline) await sleep(250);
}

/** Each key in order: what came after a message of a key is the next one, or a redelivery of earlier ones. */
export function expectKeysInOrder(ordered: Map<string, number[]>): void {
  for (const [key, numbers] of ordered) {
    let highest = -1;
    for (const n of numbers) {
      if (n > highest) {
        expect(n, `key ${key}: ${numbers.join(",")}`).toBe(highest + 1);
        highest = n;
      }
    }
  }
}

/** Reads every record of every partition back (CRC checked): the problems found, the records read and their texts. */
export async function readAllRecords(
  driver: QueueDriver,
  queue: string,
  partitions: number,
): Promise<{ problems: QueueProblem[]; records: number; stored: Map<string, string>; misnumbered: string[]; duplicates: string[] }> {
  const problems: QueueProblem[] = [];
  /** Each text stored, and where: `p<partition> <part>:<offset> #<seq>`. */
  const stored = new Map<string, string>();
  /** Records whose number is not the one after the previous record's in their part (each part counts 1, 2, 3...). */
  const misnumbered: string[] = [];
  /** Texts stored more than once (a retry written again: its idempotency key did not hold), with both places. */
  const duplicates: string[] = [];
  let records = 0;
  for (const { label, name } of storedQueues(queue, partitions)) {
    let from: string | undefined = "earliest";
    let last: { part: number; seq: number } | undefined;
    while (from) {
      const page = await browseMessages(driver, name, { from, limit: 1000, onProblem: (problem) => problems.push(problem) });
      records += page.messages.length;
      for (const m of page.messages) {
        const where = `${label} ${m.part}:${m.offset} #${m.seq}`.trim();
        if (stored.has(String(m.data))) duplicates.push(`${String(m.data)} at ${stored.get(String(m.data))} and ${where}`);
        stored.set(String(m.data), where);
        const expected = last?.part === m.part ? last.seq + 1 : 1;
        if (m.seq !== expected) misnumbered.push(`${where} (expected #${expected})`);
        last = { part: m.part, seq: m.seq };
      }
      from = page.next ?? undefined;
    }
  }
  return { problems, records, stored, misnumbered, duplicates };
}

/** The letters in every partition's dead-letter queue (`<queue>.p<k>.dead`, an ordinary queue's `<queue>.dead`), as their JSON text. */
export async function readDeadLetters(driver: QueueDriver, queue: string, partitions: number): Promise<string[]> {
  const letters: string[] = [];
  for (const { name } of storedQueues(queue, partitions)) {
    let from: string | undefined = "earliest";
    while (from) {
      const page: Awaited<ReturnType<typeof browseMessages>> | undefined = await browseMessages(driver, `${name}.dead`, {
        from,
        limit: 1000,
        onProblem: () => {},
      }).catch(() => undefined);
      if (!page) break; // no dead-letter queue: nothing dead-lettered
      for (const m of page.messages) letters.push(String(m.data));
      from = page.next ?? undefined;
    }
  }
  return letters;
}
