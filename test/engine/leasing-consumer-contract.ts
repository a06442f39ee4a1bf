// The behaviour every leasing consumer has (consumer-types.ts: LeasingConsumer), run against the
// plain and the partitioned class by consumer-contract.test.ts.
import { expect, it } from "vitest";
import type { LeasedMessage, LeasingConsumer } from "../../src/consumers/types";

export interface LeasingSubject {
  /** Writes `bodies` (a partitioned queue spreads them over its partitions). */
  produce(bodies: string[]): Promise<void>;
  /** Opens shared consumer `name` (new ones start at the oldest message). */
  open(name: string): Promise<LeasingConsumer>;
}

const bodies = (messages: LeasedMessage[]) => messages.map((m) => m.data as string).sort();
const written = ["m1", "m2", "m3", "m4"];

export function leasingConsumerContract(subject: () => Promise<LeasingSubject>): void {
  it("poll leases each message to one caller; an acked one never comes again; stats count the leases", async () => {
    const s = await subject();
    await s.produce(written);
    const c = await s.open("acks");
    const first = await c.poll({ max: 2, timeoutMs: 0 });
    const second = await c.poll({ max: 10, timeoutMs: 0 });
    expect(bodies([...first, ...second])).toEqual(written);
    expect(c.stats.inFlight).toBe(written.length);
    expect(c.stats.oldestUnacked).toMatchObject({ deliveries: 1 });
    await c.ack(first[0]!);
    expect(await c.ackAll(first.slice(1).concat(second))).toEqual(
      first
        .slice(1)
        .concat(second)
        .map(() => undefined),
    );
    expect(c.stats).toMatchObject({ inFlight: 0, oldestUnacked: null });
    expect(await c.poll({ timeoutMs: 50 })).toEqual([]);
    await c.close();
  });

  it("nack gives a message back (counted), release gives it back uncounted; extend moves the lease's end", async () => {
    const s = await subject();
    await s.produce(["m1"]);
    const c = await s.open("nacks");
    const [leased] = await c.poll({ timeoutMs: 5000 });
    const until = await c.extend(leased!, { leaseMs: 60_000 });
    expect(until).toBeGreaterThan(leased!.leaseUntil);
    await c.nack(leased!);
    const [again] = await c.poll({ timeoutMs: 5000 });
    expect(again).toMatchObject({ data: "m1", deliveries: 2 });
    expect(c.stats.redelivered).toBe(1);
    await c.release(again!);
    const [third] = await c.poll({ timeoutMs: 5000 });
    expect(third).toMatchObject({ data: "m1", deliveries: 2 });
    await expect(c.ack(again!)).rejects.toMatchObject({ code: "E_LEASE" });
    await c.ack(third!);
    await c.close();
  });

  it("messages() acks each message the loop body is done with; a break nacks the one in hand", async () => {
    const s = await subject();
    await s.produce(written);
    const c = await s.open("iterate");
    const seen: LeasedMessage[] = [];
    for await (const message of c.messages()) {
      seen.push(message);
      if (seen.length === 3) break;
    }
    const rest = await c.poll({ max: 10, timeoutMs: 5000 });
    // The first two were acked; the third came back (nacked), with the one not reached yet.
    expect(bodies(rest)).toEqual(written.filter((b) => !bodies(seen.slice(0, 2)).includes(b)));
    expect(rest.find((m) => m.data === seen[2]!.data)).toMatchObject({ deliveries: 2 });
    await c.close();
  });

  it("close: closed, and polls are refused with E_CLOSED; leases not acked come again at the next open", async () => {
    const s = await subject();
    await s.produce(["m1"]);
    const c = await s.open("close");
    expect(await c.poll({ timeoutMs: 5000 })).toHaveLength(1);
    await c.close();
    expect(c.closed).toBe(true);
    await expect(c.poll({ timeoutMs: 0 })).rejects.toMatchObject({ code: "E_CLOSED" });
    const again = await s.open("close");
    expect(bodies(await again.poll({ timeoutMs: 5000 }))).toEqual(["m1"]);
    await again.close();
  });
}
