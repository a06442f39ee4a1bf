/**
 * Outcomes from any instance: two `v-queue serve` processes (the built CLI) on one directory. One
 * holds the shared consumer (it leased); the other serves the event stream and the outcome long
 * poll from storage, and takes a progress update and an ack with its result for the holder
 * (through the consumer's inbox). Needs `npm run build` (dist/).
 */
import { join } from "pathe";
import { afterAll, describe, expect, it } from "vitest";
import type { LeaseResponse, OutcomeResponse } from "../../protocol/api";
import { openEvents, type EventReader } from "../http/_events";
import { startInstance, type ServeInstance } from "../helpers/multi-instance";
import { useTempDirs } from "../helpers/tmp";

const C = "/api/v1/queues/jobs/consumers/work";
const json = { "content-type": "application/json" };
const tempDir = useTempDirs("vq-outcomes-anywhere-");
const instances: ServeInstance[] = [];
const readers: EventReader[] = [];

afterAll(() => {
  for (const reader of readers) reader.close();
  for (const instance of instances) instance.kill("SIGKILL");
});

async function post<T>(instance: ServeInstance, path: string, body: unknown): Promise<T> {
  const res = await fetch(`${instance.url}${path}`, { method: "POST", body: JSON.stringify(body), headers: json });
  const text = await res.text();
  if (!res.ok) throw new Error(`${path} answered ${res.status}: ${text}`);
  return JSON.parse(text) as T;
}

describe("outcomes on two instances", () => {
  it("the instance that does not hold the consumer streams its events and answers a message's end", { timeout: 120_000 }, async () => {
    const dir = join(tempDir(), "data");
    for (let i = 0; i < 2; i++) instances.push(await startInstance(["--dir", dir]));
    const [holder, other] = instances as [ServeInstance, ServeInstance];
    await post(holder, "/api/v1/queues/jobs/messages", { messages: ["a", "b"] });
    const { messages } = await post<LeaseResponse>(holder, `${C}/lease`, { max: 2, leaseMs: 60_000 });
    expect(messages).toHaveLength(2);
    const [a, b] = messages as [LeaseResponse["messages"][number], LeaseResponse["messages"][number]];

    const stream = await openEvents(`${other.url}${C}/events?from=oldest`);
    readers.push(stream);
    const ended = fetch(`${other.url}${C}/outcome?part=${a.part}&offset=${a.offset}&timeoutMs=30000`).then((r) => r.json() as Promise<OutcomeResponse>);
    // On the holder, and through the other instance (to the holder's inbox).
    await post(holder, `${C}/progress`, { lease: a.lease, progress: 1 });
    await post(other, `${C}/progress`, { lease: a.lease, progress: 2 });
    await post(other, `${C}/ack`, { leases: [a.lease], results: { [a.lease]: { from: "other" } } });
    await post(holder, `${C}/nack`, { leases: [b.lease], deadLetter: true, error: "no" });

    const got = [
      (await stream.next(30_000)).outcome,
      (await stream.next(30_000)).outcome,
      (await stream.next(30_000)).outcome,
      (await stream.next(30_000)).outcome,
    ];
    expect(got.map((e) => [e.kind, e.offset, e.progress ?? e.result ?? e.error])).toEqual([
      ["progress", a.offset, 1],
      ["progress", a.offset, 2],
      ["completed", a.offset, { from: "other" }],
      ["dead", b.offset, "no"],
    ]);
    expect((await ended).outcome).toMatchObject({ kind: "completed", result: { from: "other" } });
  });
});
