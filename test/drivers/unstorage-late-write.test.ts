/**
 * A renewal written late: an instance paused in the middle of a renewal (its write issued, not
 * landed) wakes past its lease, after another instance registered, and its write lands then.
 * That stamp had run out before it was written: the live instance takes its registration (and
 * its locks) back, and the late one is refused until the live one stops. A held write stands
 * for the pause (a real SIGSTOP lands there about once in a hundred tries); the clock is faked.
 */
import { createStorage } from "unstorage";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { claimInstance, INSTANCE_KEY } from "../../adapters/drivers/utils/unstorage-instance";
import { acquireLock } from "../../adapters/drivers/utils/unstorage-lock";
import type { UnstorageLike } from "../../adapters/drivers/utils/unstorage-keys";

const LEASE_MS = 3000;

/** The storage as one process sees it: `hold()` keeps its next write to `key` in flight until `land()`. */
function processView(storage: UnstorageLike) {
  let holding: string | undefined;
  let held: (() => Promise<void>) | undefined;
  const view = {
    ...storage,
    getItemRaw: storage.getItemRaw.bind(storage),
    getKeys: storage.getKeys.bind(storage),
    hasItem: storage.hasItem.bind(storage),
    removeItem: storage.removeItem.bind(storage),
    setItemRaw(key: string, value: unknown) {
      if (key !== holding) return storage.setItemRaw(key, value as Uint8Array);
      holding = undefined;
      return new Promise<void>((resolve, reject) => (held = () => storage.setItemRaw(key, value as Uint8Array).then(resolve, reject)));
    },
  } as UnstorageLike;
  return {
    view,
    hold: (key: string) => (holding = key),
    land: async () => {
      const write = held;
      held = undefined;
      await write?.();
    },
  };
}

/** Awaits `promise`, moving the fake clock on in small steps meanwhile (its waits are timers). */
async function settled<T>(promise: Promise<T>): Promise<T> {
  let done = false;
  promise.then(
    () => (done = true),
    () => (done = true),
  );
  while (!done) await vi.advanceTimersByTimeAsync(10);
  return promise;
}

const owner = async (storage: UnstorageLike, key: string) => new TextDecoder().decode((await storage.getItemRaw(key)) as Uint8Array).split(" ")[1];

beforeEach(() => vi.useFakeTimers({ toFake: ["setTimeout", "setInterval", "clearInterval", "clearTimeout", "Date", "performance"] }));
afterEach(() => vi.useRealTimers());

describe("unstorage: a renewal that lands after its writer's pause", () => {
  it("does not take the registration from the instance that registered meanwhile", async () => {
    const storage = createStorage() as unknown as UnstorageLike;
    const a = processView(storage);
    const b = processView(storage);
    const late = claimInstance(a.view, INSTANCE_KEY, "late-a", LEASE_MS, "owner-a");
    await settled(late.ready());
    // Paused in the middle of a renewal: its write stays in flight for three leases.
    a.hold(INSTANCE_KEY);
    await vi.advanceTimersByTimeAsync(3 * LEASE_MS);
    const live = claimInstance(b.view, INSTANCE_KEY, "live-b", LEASE_MS, "owner-b");
    await settled(live.ready());
    expect(await owner(storage, INSTANCE_KEY)).toBe("owner-b");
    // Resumed: the write lands now, with a stamp that ran out during the pause.
    await a.land();
    expect(await owner(storage, INSTANCE_KEY)).toBe("owner-a");
    const lateWrite = await settled(
      late.assertOurs().then(
        () => "written",
        (error: { code?: string }) => error.code,
      ),
    );
    // The live one took it back at its next renewal; the late one writes nothing.
    expect(lateWrite).toBe("E_UNFENCED");
    await vi.advanceTimersByTimeAsync(LEASE_MS);
    expect(live.superseded).toBeUndefined();
    expect(await owner(storage, INSTANCE_KEY)).toBe("owner-b");
    await expect(settled(live.assertOurs())).resolves.toBeUndefined();
    // Once the live one stops, the late one registers again.
    await live.release();
    await expect(settled(late.assertOurs())).resolves.toBeUndefined();
    expect(await owner(storage, INSTANCE_KEY)).toBe("owner-a");
    await late.release();
  });

  it("does not take a lock from its live holder", async () => {
    const storage = createStorage() as unknown as UnstorageLike;
    const a = processView(storage);
    const lockA = await settled(acquireLock(a.view, "q:lock", "late-lock-a", LEASE_MS));
    expect(lockA).toBeDefined();
    a.hold("q:lock");
    await vi.advanceTimersByTimeAsync(3 * LEASE_MS);
    const lockB = await settled(acquireLock(storage, "q:lock", "live-lock-b", LEASE_MS));
    expect(lockB).toBeDefined();
    await a.land();
    await vi.advanceTimersByTimeAsync(LEASE_MS);
    // The live holder's renewal found a stamp that had run out before it was written: still its lock.
    expect(lockB!.lost?.aborted).toBe(false);
    await vi.advanceTimersByTimeAsync(LEASE_MS);
    expect(lockB!.lost?.aborted).toBe(false);
    await lockB!.release();
  });
});
