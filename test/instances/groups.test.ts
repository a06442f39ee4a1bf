/**
 * Groups across instances (issue 40): two `v-queue serve` processes (the built CLI) on one
 * directory, eight `worker()`s spread over them, 1,000 groups of messages produced through
 * either, handlers that fail at random, and one group whose handler always fails. Within each
 * group, messages complete in produce order (groupConcurrency 1); every message completes or is
 * dead-lettered; the group that always fails holds up its own messages only. One instance is
 * killed midway (its workers' requests go to the other one meanwhile, and to it once back).
 * Needs `npm run build` (dist/).
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "pathe";
import { afterAll, describe, expect, it } from "vitest";
import { createClient, type LeasedClientMessage, type Worker } from "../../client/index";
import { startInstance, type Instance } from "../helpers/multi-instance";
import { sleep } from "../helpers/sleep";
import { parseDeadLetter } from "../../src/consumers/shared/dead-letter";
import type { Message } from "../../src/format/message";

const QUEUE = "orders";
const GROUPS = 1000;
const PER_GROUP = 3;
const FAILING = "group-13";
const MAX_DELIVERIES = 3;

const root = mkdtempSync(join(tmpdir(), "vq-groups-"));
const instances: Instance[] = [];

afterAll(() => {
  for (const instance of instances) instance.kill("SIGKILL");
  rmSync(root, { recursive: true, force: true });
});

describe("groups on two instances", () => {
  it(
    "1,000 groups, 8 workers, random failures, an instance killed: each group in produce order, every message done or dead",
    { timeout: 240_000 },
    async () => {
      const config = join(root, "vqueue.config.json");
      writeFileSync(config, JSON.stringify({ durability: "none", shared: { leaseMs: 5000, maxDeliveries: MAX_DELIVERIES } }));
      for (let i = 0; i < 2; i++) instances.push(await startInstance(["--dir", join(root, "data"), "--config", config]));
      // Produced through both instances, in rounds: message i of every group, then message i + 1.
      for (let i = 0; i < PER_GROUP; i++) {
        const producer = createClient({ baseURL: instances[i % 2]!.url });
        await Promise.all(Array.from({ length: GROUPS }, (_, g) => producer.produce(QUEUE, { g, i }, { group: `group-${g}` })));
      }

      let seed = 7;
      const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
      const completed = new Map<number, number[]>();
      let failures = 0;
      const handle = async (m: LeasedClientMessage<{ g: number; i: number }>) => {
        const { g, i } = m.data as { g: number; i: number };
        await sleep(random() * 3);
        if (`group-${g}` === FAILING || random() < 0.15) {
          failures++;
          throw new Error("failed on purpose");
        }
        // At least once: an ack lost with the killed instance brings a done message again.
        const list = completed.get(g) ?? [];
        if (!list.includes(i)) completed.set(g, [...list, i]);
      };
      const workers: Worker[] = [];
      for (let i = 0; i < 8; i++) {
        const client = createClient({ baseURL: instances[i % 2]!.url });
        workers.push(client.worker<{ g: number; i: number }>(QUEUE, "fulfil", handle, { concurrency: 4, json: true, backoff: () => 10, onError: () => {} }));
      }
      const done = () => [...completed.values()].reduce((sum, list) => sum + list.length, 0);
      // Midway, one instance dies and comes back.
      while (done() < (GROUPS * PER_GROUP) / 3) await sleep(100);
      await instances[1]!.restart();
      const dead = createClient({ baseURL: instances[0]!.url });
      // The dead letters' bodies, read without a consumer (a browse), every page.
      const deadOnes = async () => {
        const bodies = new Set<string>();
        let from: string | undefined;
        for (;;) {
          const page = await dead.browse(`${QUEUE}.dead`, { limit: 1000, ...(from ? { from } : {}) }).catch(() => undefined);
          for (const m of page?.messages ?? []) bodies.add(parseDeadLetter({ ...m, part: 0, offset: 0, seq: 0, size: 0, crc: 0 } as Message)!.data);
          if (!page?.next || page.messages.length === 0) return bodies;
          from = page.next;
        }
      };
      // Done or dead, each message once (a done message whose ack died with the instance may be dead too: at least once).
      const missing = (deadBodies: Set<string>) => {
        const out: string[] = [];
        for (let g = 0; g < GROUPS; g++)
          for (let i = 0; i < PER_GROUP; i++)
            if (!completed.get(g)?.includes(i) && !deadBodies.has(JSON.stringify({ g, i }))) out.push(`message ${i} of group ${g}`);
        return out;
      };
      const deadline = Date.now() + 180_000;
      while (Date.now() < deadline && missing(await deadOnes()).length > 0) await sleep(250);
      await Promise.all(workers.map((w) => w.stop()));

      for (const [g, order] of completed) expect(order, `group ${g}`).toEqual([...order].sort((a, b) => a - b));
      // Every message done or dead; the failing group's all dead.
      const deadBodies = await deadOnes();
      expect(missing(deadBodies)).toEqual([]);
      expect(completed.has(13)).toBe(false);
      expect([0, 1, 2].every((i) => deadBodies.has(JSON.stringify({ g: 13, i })))).toBe(true);
      // Each group that completed all its messages did so in order; those that lost one to the dead-letter queue went on.
      const whole = [...completed.values()].filter((list) => list.length === PER_GROUP).length;
      expect(whole).toBeGreaterThan(GROUPS / 2);
      expect(failures).toBeGreaterThan(0);
    },
  );
});
