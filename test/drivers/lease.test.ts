import { describe, expect, it, vi } from "vitest";
import { leaseLock, type LeaseOptions, type Renewal } from "../../adapters/drivers/utils/lease";

/** A lease lock over stand-in storage calls: `held` says what the storage finds (true: still ours, false: another holder's). */
function lease(sinceMsAgo: number, held: boolean | Renewal) {
  const calls = { renew: 0, free: 0 };
  const options: LeaseOptions = {
    driver: "test",
    key: "q_queue.lock",
    leaseMs: 1000,
    since: Date.now() - sinceMsAgo,
    renew: vi.fn(async (): Promise<Renewal> => (calls.renew++, held === true ? "renewed" : held === false ? { takenBy: 7 } : held)),
    free: vi.fn(async () => void calls.free++),
  };
  return { ...leaseLock(options), calls };
}

describe("a lease lock's release", () => {
  it("of a fresh lease frees it without asking the storage", async () => {
    const { lock, calls } = lease(0, true);
    await lock.release();
    expect(calls).toEqual({ renew: 0, free: 1 });
    expect(lock.lost!.aborted).toBe(false);
  });

  it("of a stale lease (its holder was paused) asks first: one taken over meanwhile is reported lost, not let go as held", async () => {
    const { lock, calls } = lease(5000, false);
    const told = vi.fn();
    lock.lost!.addEventListener("abort", told);
    await lock.release();
    expect(told).toHaveBeenCalledTimes(1);
    expect(lock.lost!.reason).toMatchObject({ code: "E_LOCKED" });
    expect((lock.lost!.reason as Error).message).toMatch(
      /taken over by another holder \(epoch 7\), not renewed for 5\d{3} ms \(this process was paused or cut off past its lease of 1000 ms\)/,
    );
    expect(calls.renew).toBe(1);
  });

  it("of a stale lease that ran out with nobody taking it says so: expired, not taken over", async () => {
    const { lock } = lease(5000, "expired");
    await lock.release();
    expect(lock.lost!.reason).toMatchObject({ code: "E_LOCKED" });
    expect((lock.lost!.reason as Error).message).toMatch(
      /it expired, not renewed for 5\d{3} ms .*nobody took it since: opened again, it is taken anew \(a new epoch\)/,
    );
    expect((lock.lost!.reason as Error).message).not.toMatch(/another holder/);
  });

  it("of a stale lease still ours is a plain release", async () => {
    const { lock, calls } = lease(5000, true);
    await lock.release();
    expect(calls).toEqual({ renew: 1, free: 1 });
    expect(lock.lost!.aborted).toBe(false);
    // Released: asking again is a no-op.
    await lock.release();
    expect(calls).toEqual({ renew: 1, free: 1 });
  });
});
