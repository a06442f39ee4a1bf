/**
 * A `v-queue serve` instance paused (SIGSTOP) past its lock leases, with nobody taking its locks
 * meanwhile, then resumed (SIGCONT): it takes them again (new epochs) and goes on from the saved
 * positions, for its writer, its ordered consumer and its shared consumer, on an ordinary and on a
 * partitioned queue. On a real Redis (`redis+vq://...?lease=`: the lock keys expire during the
 * pause) and on leased fs locks (`fs:<dir>?lease=`). Needs `npm run build` (dist/).
 */
import { writeFileSync } from "node:fs";
import { join } from "pathe";
import { afterAll, describe, expect, it } from "vitest";
import { call, startInstance, type ServeInstance } from "../helpers/multi-instance";
import { redisTestsRun, startRedisServer, type RedisServer } from "../helpers/redis";
import { useTempDirs } from "../helpers/tmp";
import { sleep } from "../helpers/sleep";

const LEASE_MS = 1000;
/** Long past the lease: a Redis lock key expires, an fs lock file is stale. */
const PAUSE_MS = 3 * LEASE_MS;
/** How long the resumed instance may take to serve each kind again (about a lease; generous for a loaded machine). */
const BACK_WITHIN_MS = 15_000;
const BEFORE = ["m0", "m1", "m2", "m3"];

const tempDir = useTempDirs("vq-pause-");
const instances: ServeInstance[] = [];
let redis: RedisServer | undefined;
const available = redisTestsRun("a paused instance comes back (Redis)");

afterAll(async () => {
  for (const instance of instances) {
    instance.kill("SIGCONT");
    instance.kill("SIGKILL");
  }
  await redis?.stop();
});

describe.each([
  { storage: "redis", run: available },
  { storage: "leased fs locks", run: true },
])("an instance paused past its leases, on $storage", ({ storage, run }) => {
  it.skipIf(!run)(
    "takes its locks again and goes on from the saved positions (writer, ordered and shared consumers; ordinary and partitioned queues)",
    { timeout: 90_000 },
    async () => {
      const dir = await tempDir();
      const config = join(dir, "vqueue.config.json");
      writeFileSync(config, JSON.stringify({ durability: "none", queues: { pq: { partitions: 2 } }, shared: { leaseMs: 60_000 } }));
      let spec = `fs:${join(dir, "data")}?lease=${LEASE_MS}`;
      if (storage === "redis") {
        redis ??= await startRedisServer();
        spec = `redis+vq://127.0.0.1:${redis.port}/0?prefix=pause&lease=${LEASE_MS}`;
      }
      const a = await startInstance(["--storage", spec, "--config", config]);
      instances.push(a);
      const api = (path: string, init?: RequestInit) => call(`${a.url}/api/v1/queues/${path}`, init, 10_000);
      const produce = (queue: string, body: string) =>
        api(`${queue}/messages`, { method: "POST", body, headers: { "content-type": "text/plain", ...(queue === "pq" ? { "partition-key": "k" } : {}) } });

      // Each kind in use before the pause: two consumed and committed (ordered), two leased and acked (shared).
      for (const queue of ["oq", "pq"]) {
        for (const body of BEFORE) expect((await produce(queue, body))?.status).toBe(201);
        const consumed = (await (await api(`${queue}/consumers/ca/messages?max_messages=2`))!.json()) as ConsumeAnswer;
        expect(consumed.messages.map((m) => m.data)).toEqual(["m0", "m1"]);
        expect((await api(`${queue}/consumers/ca/commit`, { method: "POST" }))?.status).toBe(200);
        const leased = (await (await api(`${queue}/consumers/sa/lease`, {
          method: "POST",
          body: JSON.stringify({ max: 2 }),
          headers: { "content-type": "application/json" },
        }))!.json()) as LeaseAnswer;
        expect(leased.messages.map((m) => m.data)).toEqual(["m0", "m1"]);
        const acked = await api(`${queue}/consumers/sa/ack`, {
          method: "POST",
          body: JSON.stringify({ leases: leased.messages.map((m) => m.lease) }),
          headers: { "content-type": "application/json" },
        });
        expect(((await acked!.json()) as { acked: number }).acked).toBe(2);
      }

      a.kill("SIGSTOP");
      await sleep(PAUSE_MS);
      a.kill("SIGCONT");

      for (const queue of ["oq", "pq"]) {
        // The writer: a produce is taken again.
        const produced = await answeredWithin(() => produce(queue, "after"));
        expect(produced.status, `${queue} produce: ${produced.text}`).toBe(201);
        // The ordered consumer: from its saved position (after m1), nothing skipped.
        const consumed = await answeredWithin(() => api(`${queue}/consumers/ca/messages?max_messages=10`));
        expect(consumed.status, `${queue} consume: ${consumed.text}`).toBe(200);
        expect((JSON.parse(consumed.text) as ConsumeAnswer).messages.map((m) => m.data)).toEqual(["m2", "m3", "after"]);
        expect((await api(`${queue}/consumers/ca/commit`, { method: "POST" }))?.status).toBe(200);
        // The shared consumer: what was acked does not come again.
        const leased = await answeredWithin(() =>
          api(`${queue}/consumers/sa/lease`, { method: "POST", body: JSON.stringify({ max: 10 }), headers: { "content-type": "application/json" } }),
        );
        expect(leased.status, `${queue} lease: ${leased.text}`).toBe(200);
        expect((JSON.parse(leased.text) as LeaseAnswer).messages.map((m) => m.data).sort()).toEqual(["after", "m2", "m3"]);
      }
    },
  );
});

interface ConsumeAnswer {
  messages: { data: string }[];
}

interface LeaseAnswer {
  messages: { data: string; lease: string }[];
}

/**
 * The first 2xx answer of `request`, asked again while it answers otherwise (a lock being taken
 * again) until `BACK_WITHIN_MS`; then the last answer, whatever it was.
 */
async function answeredWithin(request: () => Promise<Response | undefined>): Promise<{ status: number | undefined; text: string }> {
  const deadline = Date.now() + BACK_WITHIN_MS;
  for (;;) {
    const res = await request();
    const answer = { status: res?.status, text: (await res?.text()) ?? "no answer" };
    if (answer.status !== undefined && answer.status < 300) return answer;
    if (Date.now() > deadline) return answer;
    await sleep(100);
  }
}
