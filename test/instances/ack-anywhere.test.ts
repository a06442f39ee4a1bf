/**
 * A shared consumer's leases work from any instance: two `v-queue serve` processes (the built
 * CLI) on one directory and a partitioned queue; messages leased on one instance are acked on
 * the other (as a load balancer or Nitro's `node-cluster` sends requests), and each message is
 * handed out once and acknowledged, the lag reaching 0; nacks and extends sent to the other
 * instance take effect too. Each is answered with the holder's verdict: an ack of a message
 * handed out again meanwhile is refused, one the holder cannot decide (paused) is pending (503).
 * Needs `npm run build` (dist/).
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "pathe";
import { afterAll, describe, expect, it } from "vitest";
import fsDriver from "../../adapters/drivers/fs";
import { startInstance, totalLag, type Instance } from "../helpers/multi-instance";
import { sleep } from "../helpers/sleep";

const QUEUE = "jobs";
const PARTITIONS = 4;
const COUNT = 400;
const json = { "content-type": "application/json" };

const root = mkdtempSync(join(tmpdir(), "vq-ack-anywhere-"));
const dir = join(root, "data");
const instances: Instance[] = [];

afterAll(() => {
  for (const instance of instances) instance.kill("SIGKILL");
  rmSync(root, { recursive: true, force: true });
});

async function post<T>(instance: Instance, path: string, body: unknown): Promise<T> {
  const res = await fetch(`${instance.url}/api/v1/queues/${QUEUE}/${path}`, { method: "POST", body: JSON.stringify(body), headers: json });
  const text = await res.text();
  if (!res.ok) throw new Error(`${path} answered ${res.status}: ${text}`);
  return JSON.parse(text) as T;
}

type Leased = { data: string; lease: string; deliveries: number };
const lease = (instance: Instance, timeoutMs: number, consumer = "work", more: object = {}) =>
  post<{ messages: Leased[] }>(instance, `consumers/${consumer}/lease`, { max: 50, timeoutMs, ...more });
const ack = (instance: Instance, leases: string[]) => post<{ acked: number; errors: unknown[] }>(instance, "consumers/work/ack", { leases });

describe("a partitioned queue's shared consumer on two instances", () => {
  it("takes the acks of leases handed out by the other instance: nothing comes twice, the lag reaches 0", { timeout: 120_000 }, async () => {
    const config = join(root, "vqueue.config.json");
    // Leases far longer than the test: a message handed out twice can only be an ack that was not taken.
    writeFileSync(config, JSON.stringify({ durability: "none", queues: { [QUEUE]: { partitions: PARTITIONS } }, shared: { leaseMs: 300_000 } }));
    for (let i = 0; i < 2; i++) instances.push(await startInstance(["--dir", dir, "--config", config]));
    const [a, b] = instances as [Instance, Instance];
    const produced = Array.from({ length: COUNT }, (_, i) => `m${i}`);
    for (let i = 0; i < COUNT; i += 100) await post(a, "messages", { messages: produced.slice(i, i + 100) });

    const handedOut: string[] = [];
    let acked = 0;
    const deadline = Date.now() + 90_000;
    for (let round = 0; handedOut.length < COUNT && Date.now() < deadline; round++) {
      // Each instance's leases are acked on the other one.
      const [from, to] = round % 2 === 0 ? [a, b] : [b, a];
      const { messages } = await lease(from, 200);
      if (messages.length === 0) continue;
      handedOut.push(...messages.map((m) => m.data));
      const answer = await ack(
        to,
        messages.map((m) => m.lease),
      );
      expect(answer.errors).toEqual([]);
      acked += answer.acked;
    }
    expect(handedOut.length).toBe(COUNT);
    expect(new Set(handedOut)).toEqual(new Set(produced));
    expect(acked).toBe(COUNT);

    // The acks the holders took from their inboxes reach the floors; nothing is handed out again.
    const driver = fsDriver({ dir });
    while ((await totalLag(driver, QUEUE, PARTITIONS)) > 0 && Date.now() < deadline) await sleep(100);
    expect(await totalLag(driver, QUEUE, PARTITIONS)).toBe(0);
    expect((await lease(a, 300)).messages).toEqual([]);
    expect((await lease(b, 300)).messages).toEqual([]);
  });
  it("takes nacks and extends of leases handed out by the other instance", { timeout: 60_000 }, async () => {
    const [a, b] = instances as [Instance, Instance];
    // A consumer of its own, from the start of the queue (every message is in it), leased on a only.
    const first = await lease(a, 2000, "jobs2", { max: 2, leaseMs: 2500 });
    expect(first.messages).toHaveLength(2);
    const [gaveBack, kept] = first.messages as [Leased, Leased];
    const leasedAt = Date.now();
    expect(await post(b, "consumers/jobs2/nack", { leases: [gaveBack.lease] })).toMatchObject({ nacked: 1, errors: [] });
    const extended = await post<{ extended: { lease: string; leaseUntil: number }[]; errors: unknown[] }>(b, "consumers/jobs2/extend", {
      leases: [kept.lease],
      leaseMs: 60_000,
    });
    expect(extended.errors).toEqual([]);
    expect(extended.extended[0]!.leaseUntil).toBeGreaterThan(Date.now() + 50_000);
    // The nacked one comes again at once (once the holder read its inbox); the extended one not
    // even after its first lease ran out.
    const again: Leased[] = [];
    while (Date.now() < leasedAt + 4000) {
      const { messages } = await lease(a, 200, "jobs2", { max: 50, leaseMs: 60_000 });
      again.push(...messages.filter((m) => m.deliveries > 1));
    }
    expect(again.map((m) => m.data)).toEqual([gaveBack.data]);
  });
  it("refuses an ack sent to the other instance after the message went out again, as its holder does", { timeout: 60_000 }, async () => {
    const [a, b] = instances as [Instance, Instance];
    const [first] = (await lease(a, 2000, "jobs3", { max: 1, leaseMs: 1000 })).messages as [Leased];
    await sleep(1500);
    // Ran out, and handed out again by its holder: the first worker's ack comes too late.
    let again: Leased | undefined;
    while (!again) again = (await lease(a, 2000, "jobs3", { max: 1, leaseMs: 60_000 })).messages.find((m) => m.data === first.data);
    expect(again.deliveries).toBe(2);
    const answer = await post<{ acked: number; errors: { code: string; message: string }[] }>(b, "consumers/jobs3/ack", { leases: [first.lease] });
    expect(answer.acked).toBe(0);
    expect(answer.errors).toMatchObject([{ code: "E_LEASE", message: expect.stringMatching(/with another worker now/) }]);
    // The second worker's ack is taken.
    expect(await post(b, "consumers/jobs3/ack", { leases: [again.lease] })).toMatchObject({ acked: 1, errors: [] });
  });
  it("answers an ack its holder cannot decide (paused) 503 E_PENDING with Retry-After, and its retry once it can", { timeout: 90_000 }, async () => {
    const [a, b] = instances as [Instance, Instance];
    const [leased] = (await lease(a, 2000, "jobs4", { max: 1, leaseMs: 300_000 })).messages as [Leased];
    const ackOnB = () =>
      fetch(`${b.url}/api/v1/queues/${QUEUE}/consumers/jobs4/ack`, { method: "POST", body: JSON.stringify({ leases: [leased.lease] }), headers: json });
    a.kill("SIGSTOP");
    try {
      const pending = await ackOnB();
      expect(pending.status).toBe(503);
      expect(pending.headers.get("retry-after")).toBe("1");
      expect(((await pending.json()) as { error: { code: string } }).error.code).toBe("E_PENDING");
    } finally {
      a.kill("SIGCONT");
    }
    const retried = await ackOnB();
    expect(retried.status).toBe(200);
    expect(await retried.json()).toEqual({ acked: 1, errors: [] });
    expect((await lease(a, 1000, "jobs4", { max: 50 })).messages.map((m) => m.data)).not.toContain(leased.data);
  });
});
