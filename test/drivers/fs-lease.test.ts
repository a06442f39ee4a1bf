/**
 * The fs driver with `lockLeaseMs`: locks that run out while their holder is alive but not
 * running, and writes fenced under each lock's write mutex. Real child processes, paused with
 * SIGSTOP past the lease, SIGKILLed, or running without leases beside them.
 */
import { readdirSync, utimesSync } from "node:fs";
import { mkdir, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { hostname } from "node:os";
import { join, resolve } from "pathe";
import { describe, expect, it } from "vitest";
import fsDriver from "../../adapters/drivers/fs";
import { resolveStorageDriver } from "../../adapters/storage";
import type { DriverLock } from "../../src/core/driver";
import { QueueWriter } from "../../src/writer/writer";
import { SIGNALS_END_CHILD } from "../helpers/runtime";
import { expectEndedEarly, WAKE_TIMEOUT_MS } from "../helpers/timing";
import { startScript } from "../helpers/spawn";
import { expectStaleConsumerFenced, expectStaleWriterFenced, readAll } from "../helpers/fence-checks";
import { useTempDirs } from "../helpers/tmp";
import { describeEngineOnDriver } from "./engine-suite";
import { sleep } from "../helpers/sleep";

const FENCE_CHILD = resolve(import.meta.dirname, "../helpers/fence-child.ts");
const LEASE_MS = 1000;
const freshDir = useTempDirs("vq-fs-lease-");
/** Whether a process is inside a write mutex of `dir` (the tests below cover a holder paused there). */
const insideMutex = (dir: string) => () => readdirSync(dir).some((name) => name.endsWith("~fence"));

// Every engine behaviour, each holder's write going through the fence check.
describeEngineOnDriver("fs, leased locks", async () => {
  const dir = await freshDir();
  return { driver: fsDriver({ dir, lockLeaseMs: 2000 }), reopen: () => fsDriver({ dir, lockLeaseMs: 2000 }) };
});

describe("fs driver, leased locks", () => {
  it("checks lockLeaseMs, and reads it from a storage spec", async () => {
    expect(() => fsDriver({ lockLeaseMs: 500 })).toThrow(/lockLeaseMs must be an integer from 1000 to 86400000 \(ms\), or left out .*\(got 500\)/);
    expect(() => fsDriver({ lockLeaseMs: 1.5 })).toThrow(expect.objectContaining({ code: "E_OPTION" }));
    await expect(resolveStorageDriver("fs:./q?lease=abc")).rejects.toThrow(/lease="abc" is not a whole number of ms/);
    await expect(resolveStorageDriver("fs:./q?leese=100")).rejects.toThrow(/unknown parameter "leese"; use lease/);
    await expect(resolveStorageDriver("fs:./q?lease=10")).rejects.toThrow(/lockLeaseMs must be an integer from 1000/);
    const dir = await freshDir();
    const driver = await resolveStorageDriver(`fs:${dir}?lease=1500`);
    const q = await QueueWriter.open("spec", { driver });
    await q.push("x");
    // The lock file names this process, its epoch and a nonce; no query string became a directory.
    const [pid, , , epoch, nonce] = (await readFile(join(dir, "spec_queue.lock"), "utf8")).trim().split(" ");
    expect(Number(pid)).toBe(process.pid);
    expect(Number(epoch)).toBeGreaterThan(0);
    expect(nonce).toMatch(/^[0-9a-f]{12}$/);
    await q.close();
    // Besides this process's owner file (the write mutexes link to it; removed when it exits).
    expect((await readdir(dir)).sort()).toEqual([expect.stringMatching(new RegExp(`^\\.vq-owner~${process.pid}~[0-9a-f]{8}$`)), "spec-0", "spec_info_queue"]);
    const file = await resolveStorageDriver(`file://${dir}?lease=1500`);
    expect(file.storageKey).toBe(driver.storageKey);
  });

  it.skipIf(SIGNALS_END_CHILD)(
    "a stale writer's pushes fail with E_FENCED and write nothing after the new writer's first record",
    async () => {
      const dir = await freshDir();
      await expectStaleWriterFenced(
        [`fs:${dir}?lease=${LEASE_MS}`, "-", String(LEASE_MS)],
        fsDriver({ dir, lockLeaseMs: LEASE_MS }),
        LEASE_MS,
        insideMutex(dir),
      );
    },
    30_000,
  );

  it.skipIf(SIGNALS_END_CHILD)(
    "a stale consumer cannot overwrite the new holder's saved position",
    async () => {
      const dir = await freshDir();
      await expectStaleConsumerFenced(
        [`fs:${dir}?lease=${LEASE_MS}`, "-", String(LEASE_MS)],
        fsDriver({ dir, lockLeaseMs: LEASE_MS }),
        LEASE_MS,
        insideMutex(dir),
      );
    },
    30_000,
  );

  it("a running holder keeps its lock past many leases; a killed one's is free at once", async () => {
    const dir = await freshDir();
    const child = startScript(FENCE_CHILD, "writer", `fs:${dir}?lease=${LEASE_MS}`, "-", String(LEASE_MS));
    const driver = fsDriver({ dir, lockLeaseMs: LEASE_MS });
    try {
      await child.waitFor((l) => l === "ack 5");
      const until = Date.now() + 3 * LEASE_MS;
      while (Date.now() < until) {
        expect(await driver.isLocked!("fq_queue.lock")).toBe(true);
        await expect(QueueWriter.open("fq", { driver })).rejects.toThrow(expect.objectContaining({ code: "E_LOCKED" }));
        await sleep(100);
      }
    } finally {
      child.process.kill("SIGKILL");
      await child.exited;
    }
    // A killed holder's lock is free at once, not when its lease runs out: shown by a holder whose
    // lease is longer than a loaded machine can stretch an open (a 1 s lease could run out meanwhile).
    const longDir = await freshDir();
    const holder = startScript(FENCE_CHILD, "writer", `fs:${longDir}?lease=${WAKE_TIMEOUT_MS}`, "-", String(WAKE_TIMEOUT_MS));
    try {
      await holder.waitFor((l) => l === "ack 5");
      holder.process.kill("SIGKILL");
      await holder.exited;
      const killedAt = performance.now();
      const q = await QueueWriter.open("fq", { driver: fsDriver({ dir: longDir, lockLeaseMs: WAKE_TIMEOUT_MS }), durability: "none" });
      expectEndedEarly(killedAt, WAKE_TIMEOUT_MS);
      // The killed child's owner file went with the first mutex this process made there.
      expect((await readdir(longDir)).filter((n) => n.startsWith(".vq-owner~"))).toEqual([expect.stringMatching(new RegExp(`^\\.vq-owner~${process.pid}~`))]);
      await q.push("after");
      await q.close();
    } finally {
      holder.process.kill("SIGKILL");
      await holder.exited;
    }
  }, 60_000);

  it.skipIf(SIGNALS_END_CHILD)(
    "never takes the lock of a live process that runs without leases, paused or not",
    async () => {
      const dir = await freshDir();
      const child = startScript(FENCE_CHILD, "writer", `fs:${dir}`, "-", "0");
      try {
        await child.waitFor((l) => l === "ack 5");
        child.process.kill("SIGSTOP");
        await sleep(LEASE_MS * 2);
        // Its lock file has no lease to run out: taking it would make two unfenced writers.
        await expect(QueueWriter.open("fq", { driver: fsDriver({ dir, lockLeaseMs: LEASE_MS }) })).rejects.toThrow(
          expect.objectContaining({ code: "E_LOCKED" }),
        );
      } finally {
        child.process.kill("SIGKILL");
        await child.exited;
      }
    },
    30_000,
  );

  it("says how a held lock was lost: taken over (with the new holder's epoch), or gone with nobody holding it", async () => {
    const dir = await freshDir();
    const driver = fsDriver({ dir, lockLeaseMs: LEASE_MS });
    const lostReason = async (lock: DriverLock) => {
      await new Promise<void>((resolve) => lock.lost!.addEventListener("abort", () => resolve(), { once: true }));
      return (lock.lost!.reason as Error).message;
    };
    const taken: DriverLock = (await driver.lock("t_queue.lock"))!;
    // What a takeover leaves: another holder's line, a newer epoch (the next renewal finds it).
    await writeFile(join(dir, "t_queue.lock"), `1 - ${hostname()} ${taken.epoch! + 5} 0123456789ab\n`);
    expect(await lostReason(taken)).toMatch(new RegExp(`it was taken over by another holder \\(epoch ${taken.epoch! + 5}\\), not renewed for \\d+ ms`));
    const freed = (await driver.lock("f_queue.lock"))!;
    await rm(join(dir, "f_queue.lock"));
    expect(await lostReason(freed)).toMatch(/it expired, not renewed for \d+ ms .*nobody took it since/);
    await Promise.all([taken.release(), freed.release()]);
  });

  it("takes an expired lock only once no live process is inside its write mutex", async () => {
    const dir = await freshDir();
    const driver = fsDriver({ dir, lockLeaseMs: LEASE_MS });
    const lockFile = join(dir, "held_queue.lock");
    // The init process (alive, not ours) "holds" the lock, untouched for two leases, and is inside its write mutex.
    await writeFile(lockFile, `1 - ${hostname()} 7 0123456789ab\n`);
    const old = new Date(Date.now() - 2 * LEASE_MS);
    utimesSync(lockFile, old, old);
    await writeFile(`${lockFile}~fence`, `1 - ${hostname()}\n`);
    expect(await driver.isLocked!("held_queue.lock")).toBe(false); // its lease ran out
    // Inside the mutex it may be about to write: taking the lock now could let that write land after ours.
    await expect(QueueWriter.open("held", { driver })).rejects.toThrow(expect.objectContaining({ code: "E_LOCKED" }));
    expect(await readFile(lockFile, "utf8")).toBe(`1 - ${hostname()} 7 0123456789ab\n`);
    await rm(`${lockFile}~fence`);
    const q = await QueueWriter.open("held", { driver, durability: "none" });
    const [, , , epoch] = (await readFile(lockFile, "utf8")).trim().split(" ");
    expect(Number(epoch)).toBeGreaterThan(7);
    await q.push("mine");
    await q.close();
  });

  it("clears a write mutex left by a dead process, and keeps out while a live one holds it", async () => {
    const dir = await freshDir();
    const driver = fsDriver({ dir, lockLeaseMs: 2000 });
    const q = await QueueWriter.open("mx", { driver, durability: "none" });
    await q.push("first");
    const mutex = join(dir, "mx_queue.lock~fence");
    // A process that died inside the mutex (pid 2^22 + 1 is above Linux's pid limit: never alive).
    await writeFile(mutex, `${2 ** 22 + 1} 1 ${hostname()}\n`);
    // And another that died while clearing it (breakers take turns through this file).
    await writeFile(`${mutex}~break`, `${2 ** 22 + 2} 1 ${hostname()}\n`);
    await q.push("second");
    expect((await readdir(dir)).filter((n) => n.includes("~") && !n.startsWith(".vq-owner~"))).toEqual([]);
    // This host's init process (alive, not ours) holds it: the write waits, then is refused.
    await writeFile(mutex, `1 - ${hostname()}\n`);
    const started = Date.now();
    await expect(q.push("third")).rejects.toThrow(/write mutex .* is held by 1 - .* that does not let go/);
    expect(Date.now() - started).toBeGreaterThanOrEqual(1900);
    await rm(mutex);
    await q.close().catch(() => {});
    const { all } = await readAll(fsDriver({ dir, lockLeaseMs: 2000 }), "mx");
    expect(all.map((m) => m.data)).toEqual(["first", "second"]);
  }, 30_000);

  it("sweeps what a killed process left beside its locks (a part moved aside to delete, temp and owner files), not what a live one has", async () => {
    const dir = await freshDir();
    const dead = 2 ** 22 + 1; // above Linux's pid limit: never alive
    const left = [`q-0~removed-${dead}-lz3k9`, `q_queue.lock~${dead}.0badf00d.tmp`, `q_queue.lock~${dead}.0badf00d.stale`, `.vq-owner~${dead}~cafe0123`];
    const kept = [`q-1~removed-${process.pid}-lz3k9`, `q_queue.lock~1.0badf00d.tmp`];
    await mkdir(join(dir, left[0]!));
    await writeFile(join(dir, left[0]!, "00000000.data"), "old part");
    for (const name of [...left.slice(1), ...kept]) await writeFile(join(dir, name), "x");
    const q = await QueueWriter.open("q", { driver: fsDriver({ dir, lockLeaseMs: 2000 }), durability: "none" });
    await q.push("one"); // the first write mutex this process makes in the directory
    const names = await readdir(dir);
    expect(left.filter((name) => names.includes(name))).toEqual([]);
    expect(kept.filter((name) => !names.includes(name))).toEqual([]);
    await q.close();
  });
});
