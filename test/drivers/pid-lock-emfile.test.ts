/**
 * A process out of file descriptors (EMFILE) still releases its pid locks: else the lock
 * file stays, held by a live process, and that consumer answers E_LOCKED until a restart.
 */
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join, resolve } from "pathe";
import { describe, expect, it } from "vitest";
import { useTempDirs } from "../helpers/tmp";

const SCRIPT = resolve(import.meta.dirname, "_pid-lock-release.ts");
const tempDir = useTempDirs("vq-pidlock-");

describe("pid lock", () => {
  it("is released with no file descriptor left", async () => {
    const path = join(await tempDir(), "c.lock");
    // $0 and "$@": no quoting of paths into the script.
    const out = execFileSync("bash", ["-c", 'ulimit -n 64 && exec "$0" --import jiti/register "$@"', process.execPath, SCRIPT, path], {
      encoding: "utf8",
      timeout: 20_000,
    });
    expect(JSON.parse(out)).toEqual({ exhausted: "EMFILE", released: true });
    expect(existsSync(path)).toBe(false);
  });
});
