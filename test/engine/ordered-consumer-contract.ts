// The behaviour every ordered consumer has (consumer-types.ts: OrderedConsumer), run against the
// plain and the partitioned class by consumer-contract.test.ts.
import { expect, it } from "vitest";
import type { ConsumedMessage, OrderedConsumer } from "../../src/consumers/types";

export interface OrderedSubject {
  /** Writes `bodies` (a partitioned queue spreads them over its partitions). */
  produce(bodies: string[]): Promise<void>;
  /** Opens consumer `name` (new ones start at the oldest message). */
  open(name: string): Promise<OrderedConsumer>;
}

const bodies = (messages: ConsumedMessage[]) => messages.map((m) => m.data as string);

/** Each partition's bodies in the order handed out (a plain queue: one list). */
function byPartition(messages: ConsumedMessage[]): string[][] {
  const lists = new Map<number | undefined, string[]>();
  for (const m of messages) lists.set(m.partition, [...(lists.get(m.partition) ?? []), m.data as string]);
  return [...lists.values()];
}

/** Everything there is, read without waiting. */
async function drain(consumer: OrderedConsumer): Promise<ConsumedMessage[]> {
  const out: ConsumedMessage[] = [];
  for (let batch = await consumer.read({ max: 3 }); batch.length > 0; batch = await consumer.read({ max: 3 })) out.push(...batch);
  return out;
}

const written = ["m1", "m2", "m3", "m4", "m5", "m6"];

export function orderedConsumerContract(subject: () => Promise<OrderedSubject>): void {
  it("hands every message out once, in order (within a partition), then nothing; poll waits for the next one", async () => {
    const s = await subject();
    await s.produce(written);
    const c = await s.open("order");
    const got = await drain(c);
    expect(bodies(got).sort()).toEqual(written);
    for (const list of byPartition(got)) expect(list).toEqual([...list].sort());
    expect(await c.poll({ timeoutMs: 50 })).toEqual([]);
    const next = c.poll({ timeoutMs: 30_000 });
    await s.produce(["m7"]);
    expect(bodies(await next)).toEqual(["m7"]);
    await c.close();
  });

  it("commit saves the position a reopened consumer resumes at; rewind hands out again what was not committed", async () => {
    const s = await subject();
    await s.produce(written);
    const c = await s.open("commits");
    const first = await c.read({ max: 2 });
    await c.commit();
    const second = await c.read({ max: 2 });
    await c.rewind();
    expect(bodies(await drain(c))).toEqual(expect.arrayContaining(bodies(second)));
    await c.close();
    const again = await s.open("commits");
    const rest = await drain(again);
    expect(bodies(rest).sort()).toEqual(written.filter((b) => !bodies(first).includes(b)));
    await again.close();
  });

  it("seek to earliest, latest, a time or a cursor saves that position and resolves with its cursor", async () => {
    const s = await subject();
    const before = Date.now() - 1000;
    await s.produce(written);
    const c = await s.open("seeks");
    await c.read({ max: 2 });
    const cursor = c.cursor;
    expect(typeof cursor).toBe("string");
    await drain(c);
    expect(typeof (await c.seek("earliest"))).toBe("string");
    expect(bodies(await drain(c)).sort()).toEqual(written);
    await c.seek("latest");
    expect(await c.read()).toEqual([]);
    await c.seek({ time: before });
    expect(bodies(await drain(c)).sort()).toEqual(written);
    // A composite cursor moves the partitions it names only: the others start over here.
    await c.seek("earliest");
    await c.seek(cursor);
    expect(await drain(c)).toHaveLength(written.length - 2);
    await expect(c.seek("no such cursor")).rejects.toMatchObject({ code: "E_CURSOR" });
    // Saved: a reopened consumer is where the seek left it.
    await c.seek("earliest");
    await c.close();
    const again = await s.open("seeks");
    expect(await drain(again)).toHaveLength(written.length);
    await again.close();
  });

  it("lag counts what is not committed; takeMissed is 0 when retention deleted nothing", async () => {
    const s = await subject();
    await s.produce(written);
    const c = await s.open("lag");
    expect(await c.lag()).toBe(written.length);
    await c.read({ max: 2 });
    expect(await c.lag()).toBe(written.length);
    await c.commit();
    expect(await c.lag()).toBe(written.length - 2);
    expect(c.takeMissed()).toBe(0);
    await c.close();
  });

  it("messages() iterates and commits as it goes; a break commits what was done and hands the message in hand out again", async () => {
    const s = await subject();
    await s.produce(written);
    const c = await s.open("iterate");
    const seen: string[] = [];
    for await (const message of c.messages({ max: 2 })) {
      seen.push(message.data as string);
      if (seen.length === 3) break;
    }
    await c.close();
    const again = await s.open("iterate");
    const rest = bodies(await drain(again));
    // The first two were done (committed); the third was in hand at the break: it comes again.
    expect(rest.sort()).toEqual(written.filter((b) => !seen.slice(0, 2).includes(b)));
    expect(rest).toContain(seen[2]);
    await again.close();
  });

  it("messages() stops when its signal aborts", async () => {
    const s = await subject();
    await s.produce(["m1"]);
    const c = await s.open("abort");
    const controller = new AbortController();
    const seen: string[] = [];
    const loop = (async () => {
      for await (const message of c.messages({ signal: controller.signal })) seen.push(message.data as string);
    })();
    await expect.poll(() => seen).toEqual(["m1"]);
    controller.abort();
    await loop;
    expect(await c.lag()).toBe(0);
    await c.close();
  });

  it("close: closed, and reads are refused with E_CLOSED", async () => {
    const s = await subject();
    await s.produce(["m1"]);
    const c = await s.open("close");
    await c.close();
    expect(c.closed).toBe(true);
    await expect(c.read()).rejects.toMatchObject({ code: "E_CLOSED" });
    await c.close();
  });
}
