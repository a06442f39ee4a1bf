// The consume and lease routes behave alike on a plain and a partitioned queue (they speak to one
// slot interface per kind, runtime/queue-form.ts): the same client calls, the same outcomes;
// on a partitioned queue messages carry their partition and cursors are composite.
import { describe, expect, it } from "vitest";
import { createClient, type ClientMessage } from "../../client/index";
import { startServer } from "./_server";

const written = ["m1", "m2", "m3", "m4", "m5", "m6"];
const sorted = (messages: Pick<ClientMessage, "data">[]) => messages.map((m) => m.data as string).sort();

/** A server with queue "q" (of 3 partitions when `partitioned`) holding `written`, spread over the partitions by key. */
async function setup(partitioned: boolean) {
  const s = await startServer(partitioned ? { queues: { q: { partitions: 3 } } } : {});
  const vq = createClient({ baseURL: s.url });
  for (const body of written) await vq.produce("q", [body], partitioned ? { partitionKey: body } : {});
  return vq;
}

describe.each([
  ["plain", false],
  ["partitioned", true],
])("ordered consumer routes on a %s queue", (_, partitioned) => {
  it("consume (JSON and binary alike), commit the batch cursor, rewind, seek to earliest, latest, a time and a cursor", async () => {
    const before = Date.now() - 1000;
    const vq = await setup(partitioned);
    const first = await vq.consume("q", "c", { maxMessages: 2, timeoutMs: 0 });
    expect(first.messages).toHaveLength(2);
    expect(first.messages.every((m) => (m.partition !== undefined) === partitioned)).toBe(true);
    expect(first.cursor).toMatch(partitioned ? /^p\d:\d+\.\d+\.\d+(,p\d:\d+\.\d+\.\d+)*$/ : /^\d+\.\d+\.\d+$/);
    await vq.commit("q", "c", first.cursor);
    const binary = await vq.consume("q", "c", { maxMessages: 10, timeoutMs: 0, format: "binary" });
    expect(sorted(binary.messages)).toEqual(written.filter((b) => !sorted(first.messages).includes(b)));
    // Not committed: handed out again after a rewind.
    await vq.rewind("q", "c");
    expect(sorted((await vq.consume("q", "c", { maxMessages: 10, timeoutMs: 0 })).messages)).toEqual(sorted(binary.messages));

    for (const to of ["earliest", { time: before }, { time: new Date(before).toISOString() }] as const) {
      expect(typeof (await vq.seek("q", "c", to)).cursor).toBe("string");
      expect(sorted((await vq.consume("q", "c", { maxMessages: 10, timeoutMs: 0 })).messages)).toEqual(written);
    }
    await vq.seek("q", "c", "latest");
    expect((await vq.consume("q", "c", { maxMessages: 10, timeoutMs: 0 })).messages).toEqual([]);
    // The first batch's cursor: what followed it comes next (a composite one moves the partitions it names).
    await vq.seek("q", "c", "earliest");
    await vq.seek("q", "c", first.cursor!);
    expect(sorted((await vq.consume("q", "c", { maxMessages: 10, timeoutMs: 0 })).messages)).toEqual(
      written.filter((b) => !sorted(first.messages).includes(b)),
    );
    // The other kind's cursor, or a message by part and sequence on a partitioned queue: 400 saying what is allowed.
    await expect(vq.seek("q", "c", partitioned ? "0.0.0" : "p0:0.0.0")).rejects.toMatchObject({ status: 400, code: "E_PARAM" });
    if (partitioned) await expect(vq.seek("q", "c", { part: 0, seq: 1 })).rejects.toMatchObject({ status: 400, code: "E_PARAM" });
  });
});

describe.each([
  ["plain", false],
  ["partitioned", true],
])("leasing consumer routes on a %s queue", (_, partitioned) => {
  it("lease (binary framing), ack, nack, extend; tokens name the partition on a partitioned queue", async () => {
    const vq = await setup(partitioned);
    const leased = await vq.lease("q", "w", { max: 10 });
    expect(sorted(leased)).toEqual(written);
    expect(leased.every((m) => m.lease.startsWith("p") === partitioned)).toBe(true);
    const [a, b, ...rest] = leased;
    expect((await vq.extend("q", "w", [a!.lease], { leaseMs: 60_000 })).extended).toHaveLength(1);
    expect((await vq.nack("q", "w", [a!.lease])).nacked).toBe(1);
    expect((await vq.ack("q", "w", [b!.lease, ...rest.map((m) => m.lease)])).acked).toBe(written.length - 1);
    const again = await vq.lease("q", "w", { max: 10, timeoutMs: 5000 });
    expect(again.map((m) => [m.data, m.deliveries])).toEqual([[a!.data, 2]]);
    expect((await vq.ack("q", "w", [again[0]!.lease])).acked).toBe(1);
    expect(await vq.lease("q", "w", { max: 10 })).toEqual([]);
  });
});
