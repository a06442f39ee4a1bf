/**
 * The baseline of the many-instances bench (issue 15): Redis Streams on a Redis Cluster, through
 * ioredis `Cluster`. One stream per partition, each under its own hash tag, the tags picked so
 * that the streams spread evenly over the masters (the baseline at its best). Producers pipeline
 * `XADD` in batches (one batch, one stream, one round trip); one consumer per stream in one
 * consumer group reads `XREADGROUP COUNT <batch>` and acknowledges each batch with one `XACK`
 * before its next read (as v-queue commits each batch).
 */
import type { Cluster } from "ioredis";
import type { RedisCluster } from "../test/helpers/redis-cluster";
import type { Batch, Workload, Measured, System } from "./instances-workload";
import { WARM_BATCHES } from "./serve-instances";
import { noRetries, payloadId } from "./instances-workload";

export async function streamsOnCluster(cluster: RedisCluster, work: Workload): Promise<System> {
  const { Cluster: ClusterClient } = await import("ioredis");
  // One client per producer loop (each its own connections to the masters), as bench/http.ts gives each loop its own.
  const clients: Cluster[] = [];
  for (let i = 0; i < Math.max(work.producers, work.partitions); i++) {
    const client = new ClusterClient(cluster.startupNodes, { redisOptions: { maxRetriesPerRequest: 1 } });
    client.on("error", () => {}); // surfaced by the awaited calls
    clients.push(client);
  }
  await Promise.all(clients.map((c) => c.ping()));
  const tags = await spreadTags(clients[0]!, work.partitions);
  /** Produces `bodies` to P fresh streams, then drains them with one group consumer each; checks every message came once. */
  const pass = async (name: string, bodies: Batch[]): Promise<Measured> => {
    const keys = tags.tags.map((tag) => `bench:{${tag}}:${name}`);
    const messages = bodies.reduce((n, b) => n + b.payloads.length, 0);
    // Produce: each loop takes the next batch; batch b goes to stream b mod P.
    let next = 0;
    const t0 = performance.now();
    await Promise.all(
      clients.slice(0, work.producers).map(async (client) => {
        for (let b = next++; b < bodies.length; b = next++) {
          const pipeline = client.pipeline();
          for (const payload of bodies[b]!.payloads) pipeline.xadd(keys[b % keys.length]!, "*", "d", payload);
          for (const [error] of (await pipeline.exec()) ?? []) if (error) throw error;
        }
      }),
    );
    const produce = (performance.now() - t0) / 1000;
    for (const key of keys) await clients[0]!.xgroup("CREATE", key, "g", "0");
    const seen = new Uint8Array(work.messages);
    const t1 = performance.now();
    const counts = await Promise.all(keys.map((key, k) => drain(clients[k]!, key, work.batch, seen)));
    const consume = (performance.now() - t1) / 1000;
    const total = counts.reduce((a, b) => a + b, 0);
    if (total !== messages || seen.filter((s) => s !== 0).length !== messages || seen.some((s) => s > 1))
      throw new Error(`Redis Streams: read ${total} messages, expected each of ${messages} once`);
    for (const key of keys) await clients[0]!.del(key);
    return { produce, consume, duplicates: 0, retried: noRetries() };
  };
  return {
    label: `Redis Streams on the cluster, ${work.partitions} streams (${tags.perMaster})`,
    async run(round, bodies): Promise<Measured> {
      // Before the first clock, as the v-queue servers (bench/serve-instances.ts): this client's
      // paths compiled on a pass of its own, so the first round is not the only cold one.
      if (round === 0) await pass(`warm`, bodies.slice(0, WARM_BATCHES));
      return pass(`r${round}`, bodies);
    },
    async close() {
      await Promise.all(clients.map((c) => c.quit().catch(() => c.disconnect())));
    },
  };
}

/** One consumer of the group on one stream: reads until the stream is drained, one XACK per batch. */
async function drain(client: Cluster, key: string, batch: number, seen: Uint8Array): Promise<number> {
  let n = 0;
  for (;;) {
    const res = (await client.xreadgroup("GROUP", "g", "c", "COUNT", batch, "STREAMS", key, ">")) as [string, [string, string[]][]][] | null;
    const entries = res?.[0]?.[1] ?? [];
    if (entries.length === 0) return n;
    await client.xack(key, "g", ...entries.map(([id]) => id));
    for (const [, fields] of entries) seen[payloadId(fields[1]!)]!++;
    n += entries.length;
  }
}

/**
 * P hash tags whose slots fall on the masters in turn (`CLUSTER KEYSLOT` and the client's slot
 * map), so that each master holds P / masters streams; `perMaster` says how they landed.
 */
async function spreadTags(client: Cluster, partitions: number): Promise<{ tags: string[]; perMaster: string }> {
  const masterOf = async (tag: string) => {
    const slot = (await client.cluster("KEYSLOT", `{${tag}}`)) as number;
    return (client as unknown as { slots: string[][] }).slots[slot]?.[0] ?? "?";
  };
  const masters = [...new Set((client as unknown as { slots: string[][] }).slots.map((nodes) => nodes[0]!))].sort();
  const tags: string[] = [];
  const count = new Map<string, number>();
  for (let k = 0, j = 0; k < partitions && j < 10_000; j++) {
    const tag = `s${k}-${j}`;
    const master = await masterOf(tag);
    if (master !== masters[k % masters.length]) continue;
    tags.push(tag);
    count.set(master, (count.get(master) ?? 0) + 1);
    k++;
  }
  if (tags.length !== partitions) throw new Error(`Could not spread ${partitions} streams over the masters ${masters.join(", ")}`);
  return { tags, perMaster: `${[...count.values()].join("+")} over ${masters.length} masters` };
}
