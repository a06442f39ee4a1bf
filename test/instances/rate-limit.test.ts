/**
 * A shared consumer's rate limit across instances (issue 40): three `v-queue serve` processes
 * (the built CLI) on one directory, twelve `worker()`s spread over them, `limiter: { max: 100,
 * durationMs: 1000 }`: the consumer is held by one instance at a time and handed over as the
 * workers' requests come, its window going with it (journal lines), so that the workers together
 * get about 100 leases a second, never more than 100 + 5 in any second. Counted by the hand-out
 * times the server gives (a lease's end less its time), not by the test's clock. 8 s of measuring
 * in CI, 20 s with `VQ_LONG=1`. Needs `npm run build` (dist/).
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "pathe";
import { afterAll, describe, expect, it } from "vitest";
import { createClient, type LeasedClientMessage, type Worker } from "../../client/index";
import { startInstance, type Instance } from "../helpers/multi-instance";
import { handedOutAt, mostInAnyWindow } from "../helpers/rate";
import { sleep } from "../helpers/sleep";

const QUEUE = "calls";
const MAX = 100;
const DURATION_MS = 1000;
const MEASURE_S = process.env.VQ_LONG === "1" ? 20 : 8;
const LEASE_MS = 600_000;
/** A backlog the workers never exhaust while measuring. */
const COUNT = MAX * (MEASURE_S + 6);

const root = mkdtempSync(join(tmpdir(), "vq-rate-limit-"));
const dir = join(root, "data");
const instances: Instance[] = [];

afterAll(() => {
  for (const instance of instances) instance.kill("SIGKILL");
  rmSync(root, { recursive: true, force: true });
});

/** The three instances, started once: the limit is the config's for queue QUEUE only. */
async function started(): Promise<Instance[]> {
  if (instances.length > 0) return instances;
  const config = join(root, "vqueue.config.json");
  const limiter = { max: MAX, durationMs: DURATION_MS };
  writeFileSync(config, JSON.stringify({ durability: "none", shared: { leaseMs: LEASE_MS }, queues: { [QUEUE]: { shared: { limiter } } } }));
  for (let i = 0; i < 3; i++) instances.push(await startInstance(["--dir", dir, "--config", config]));
  return instances;
}

describe("a rate-limited shared consumer on three instances", () => {
  it(
    `12 workers, max ${MAX} per ${DURATION_MS} ms: about ${MAX} leases a second over ${MEASURE_S} s, never more than ${MAX + 5} in a second`,
    { timeout: 180_000 },
    async () => {
      const config = join(root, "vqueue.config.json");
      writeFileSync(config, JSON.stringify({ durability: "none", shared: { leaseMs: LEASE_MS, limiter: { max: MAX, durationMs: DURATION_MS } } }));
      for (let i = 0; i < 3; i++) instances.push(await startInstance(["--dir", dir, "--config", config]));
      const producer = createClient({ baseURL: instances[0]!.url });
      for (let i = 0; i < COUNT; i += 500)
        await producer.produce(
          QUEUE,
          Array.from({ length: Math.min(500, COUNT - i) }, (_, k) => `m${i + k}`),
        );

      const times: number[] = [];
      const bodies = new Set<string>();
      const handle = (m: LeasedClientMessage) => {
        times.push(handedOutAt(m, LEASE_MS));
        bodies.add(m.data as string);
      };
      const workers: Worker[] = [];
      for (let i = 0; i < 12; i++) {
        const client = createClient({ baseURL: instances[i % 3]!.url });
        workers.push(client.worker(QUEUE, "work", handle, { concurrency: 4, leaseMs: LEASE_MS, onError: () => {} }));
      }
      // A second to start (the first hand-overs), then the measured seconds.
      await sleep((MEASURE_S + 1) * 1000);
      await Promise.all(workers.map((w) => w.stop()));

      expect(bodies.size).toBe(times.length); // nothing twice: the leases outlive the run
      expect(mostInAnyWindow(times, DURATION_MS)).toBeLessThanOrEqual(MAX + 5);
      // The measured seconds, from a second after the first hand-out, by the server's clock.
      const start = Math.min(...times) + 1000;
      const perSecond = Array.from({ length: MEASURE_S - 1 }, (_, k) => times.filter((t) => t >= start + k * 1000 && t < start + (k + 1) * 1000).length);
      for (const count of perSecond) expect(count).toBeLessThanOrEqual(MAX + 5);
      // The workers outpace the limit (a backlog, handlers that return at once): the budget is used, ~MAX a second.
      const mean = perSecond.reduce((a, b) => a + b, 0) / perSecond.length;
      expect(mean, `per second: ${perSecond.join(", ")}`).toBeGreaterThanOrEqual(MAX - 5);
    },
  );

  it("a back-off sent to an instance that does not hold the consumer reaches its holder (through the consumer's inbox)", { timeout: 120_000 }, async () => {
    const [a, b] = (await started()) as [Instance, Instance];
    const [ca, cb] = [createClient({ baseURL: a.url }), createClient({ baseURL: b.url })];
    await ca.produce("jobs", ["x", "y"]);
    // Leased on a: a holds the consumer now.
    expect((await ca.lease("jobs", "w", { max: 1 })).map((m) => m.data)).toEqual(["x"]);
    const { limitedUntil } = await cb.backOff("jobs", "w", 60_000);
    expect(limitedUntil).toBeGreaterThan(Date.now() + 30_000);
    expect(await ca.lease("jobs", "w", { max: 1 })).toEqual([]);
    const listed = (await (await fetch(`${a.url}/api/v1/queues/jobs/consumers`)).json()) as { consumers: { name: string; limitedUntil?: number }[] };
    expect(listed.consumers.find((c) => c.name === "w")?.limitedUntil).toBe(limitedUntil);
  });
});
