/**
 * A stale pid lock (its owner SIGKILLed) taken over by many at once, as a server restarted after
 * a crash does when its workers' acks, nacks and leases come together (runtime/registry.ts looks
 * whether a consumer is free by taking its lock and letting go at once). Taking over must never
 * move a live lock: then one that its owner released meanwhile came back, held by this live
 * process and by nobody in it, and the server answered E_LOCKED for that consumer until it was
 * restarted (test/instances/shared-chaos.test.ts stalled so).
 */
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { dirname, join } from "pathe";
import { describe, expect, it } from "vitest";
import { acquirePidLock, breakerPath } from "../../adapters/drivers/utils/pid-lock";
import { sleep } from "../helpers/sleep";
import { useTempDirs } from "../helpers/tmp";

const tempDir = useTempDirs("vq-pidlock-stale-");
const ROUNDS = 400;
const TAKERS = 8;
/** A process that ran and is gone (its start time made up: a reused pid does not make it alive). */
const deadOwner = () => `${spawnSync(process.execPath, ["-e", ""]).pid!} 123 ${hostname()}\n`;

describe("pid lock, taken over from a dead owner", () => {
  it("by many at once in one process: one holder at a time, each release frees it, nothing left behind", async () => {
    const dead = deadOwner();
    const dir = tempDir();
    let holders = 0;
    let most = 0;
    const leftHeld: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const path = join(dir, `c${round}.lock`);
      writeFileSync(path, dead);
      await Promise.all(
        Array.from({ length: TAKERS }, async () => {
          // Staggered by a few ms, as requests arrive: takers at different steps of the takeover.
          await sleep(Math.random() * 4);
          const lock = await acquirePidLock(path);
          if (!lock) return;
          most = Math.max(most, ++holders);
          await sleep(Math.random());
          holders--;
          await lock.release();
        }),
      );
      if (existsSync(path)) leftHeld.push(round);
    }
    expect(most).toBe(1);
    expect(leftHeld, `rounds whose lock file stayed, held by this process and by nobody in it`).toEqual([]);
    // No breaker nor temporary file left either.
    expect(readdirSync(dir).filter((name) => name.includes("~"))).toEqual([]);
    // And it is free: taken at once.
    const lock = await acquirePidLock(join(dir, "c0.lock"));
    expect(lock).toBeDefined();
    await lock!.release();
  });

  it("by one whose breaker a process that died while removing it left behind: taken, the breakers go", async () => {
    const path = join(tempDir(), "c.lock");
    const stale = deadOwner();
    writeFileSync(path, stale);
    writeFileSync(breakerPath(path, stale), deadOwner());
    const lock = await acquirePidLock(path);
    expect(lock).toBeDefined();
    await lock!.release();
    expect(readdirSync(dirname(path))).toEqual([]);
  });
});
