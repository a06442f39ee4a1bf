/**
 * The playgrounds' `npm ci`, shared by the host files that run at once: one process installs, the
 * others wait for it and use its node_modules (installs at once would write one node_modules twice).
 */
import { execFileSync, spawnSync } from "node:child_process";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "pathe";
import { describe, expect, it } from "vitest";
import { startScript } from "../helpers/spawn";
import { installLock } from "./_host";
import { useTempDirs } from "../helpers/tmp";

const CHILD = resolve(import.meta.dirname, "_install-child.ts");
const freshDir = useTempDirs("vq-install-");

/** A package with one local dependency (no registry) whose install is logged and takes 3 s: installs at once overlap. */
async function playground(): Promise<string> {
  const dir = await freshDir();
  mkdirSync(join(dir, "dep"));
  writeFileSync(join(dir, "dep/package.json"), JSON.stringify({ name: "dep", version: "1.0.0" }));
  const preinstall = `node -e "require('fs').appendFileSync('installs.log', 'npm ci\\n'); setTimeout(() => {}, 3000)"`;
  writeFileSync(
    join(dir, "package.json"),
    JSON.stringify({ name: "pg", version: "1.0.0", private: true, dependencies: { dep: "file:dep" }, scripts: { preinstall } }),
  );
  execFileSync("npm", ["install", "--package-lock-only", "--ignore-scripts", "--no-audit", "--no-fund"], { cwd: dir, stdio: "ignore" });
  return dir;
}

describe("the playground install", () => {
  it("runs once for processes that ask at once; each returns once node_modules is there", async () => {
    const dir = await playground();
    const children = Array.from({ length: 3 }, () => startScript(CHILD, dir));
    try {
      for (const child of children) await child.waitFor((line) => line === "installed", 60_000);
      expect(readFileSync(join(dir, "installs.log"), "utf8")).toBe("npm ci\n");
      expect(readFileSync(join(dir, "node_modules/.package-lock.json"), "utf8")).toContain('"node_modules/dep"');
    } finally {
      for (const child of children) child.process.kill("SIGKILL");
    }
  }, 90_000);

  it("takes over the lock of an installer that is gone", async () => {
    const dir = await playground();
    // What a killed run leaves: the lock, naming a process that no longer runs.
    writeFileSync(installLock(dir), String(spawnSync(process.execPath, ["-e", ""]).pid));
    const child = startScript(CHILD, dir);
    try {
      await child.waitFor((line) => line === "installed", 60_000);
      expect(readFileSync(join(dir, "installs.log"), "utf8")).toBe("npm ci\n");
    } finally {
      child.process.kill("SIGKILL");
      rmSync(installLock(dir), { force: true });
    }
  }, 90_000);
});
