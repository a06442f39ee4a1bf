import { existsSync } from "node:fs";
import { join } from "pathe";
import type { ArgsDef } from "citty";
import { describe, expect, it } from "vitest";
import { commands } from "../../adapters/commands/_all";
import { checkFlags } from "../../adapters/commands/_flags";
import { useTempDirs } from "../helpers/tmp";
import { cli, STACK, startCli, until } from "./_cli";

const tempDir = useTempDirs("vq-cli-flags-");

const check = (command: string, rawArgs: string[]) => () => checkFlags(rawArgs, commands[command]!.args as ArgsDef, command);

describe("unknown flags", () => {
  it("push --dealy 5m: refused with the nearest flag, nothing pushed", async () => {
    const dir = join(await tempDir(), "d");
    const run = await cli(["push", "q", "msg", "--dealy", "5m", "--dir", dir]);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('Unknown option --dealy for "v-queue push" (did you mean "--delay"?). See v-queue push --help.');
    expect(run.stderr).not.toMatch(STACK);
    expect(existsSync(join(dir, "q"))).toBe(false);
  });

  it("serve --prot 9096: refused before serving anything", async () => {
    const root = await tempDir();
    // --port 0: were the flag ignored, the server would not take anyone's port.
    const serving = startCli(["serve", "--prot", "9096", "--port", "0", "--dir", join(root, "d")], { cwd: root });
    const run = await until(serving.output, (r) => r.code !== null || (r.stdout + r.stderr).includes("serving")).finally(() => serving.child.kill());
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('Unknown option --prot for "v-queue serve" (did you mean "--port"?)');
    expect(run.stdout + run.stderr).not.toContain("serving");
  });

  it("every command refuses a flag it does not take, and a short one", () => {
    for (const name of Object.keys(commands)) {
      expect(check(name, ["q", "--bogus", "x"]), name).toThrow(`Unknown option --bogus for "v-queue ${name}"`);
      expect(check(name, ["q", "-Z"]), name).toThrow(`Unknown option -Z for "v-queue ${name}"`);
    }
    // Far from every flag: no suggestion.
    expect(check("push", ["q", "--zzzzzzzz"])).toThrow(/--zzzzzzzz for "v-queue push"\. See/);
    // A negation of a flag that is no switch is unknown too.
    expect(check("push", ["q", "--no-key"])).toThrow("Unknown option --no-key");
  });

  it("takes every flag as citty does: values (after a space or =), camelCase, negations, aliases, clusters, --help, and words after --", () => {
    expect(check("push", ["q", "m", "--delay", "5m", "--partition-key=k", "--partitionKey", "k", "--no-stdin", "--dir", "--not-a-flag"])).not.toThrow();
    expect(check("serve", ["--no-auth", "--log-level", "warn", "--data-dir=d"])).not.toThrow();
    expect(check("consume", ["q", "c", "--no-commit", "-f", "--help"])).not.toThrow();
    expect(check("stat", ["-w", "--json", "--version"])).not.toThrow();
    expect(check("purge", ["q", "-y"])).not.toThrow();
    expect(check("push", ["q", "--", "--dealy", "-x"])).not.toThrow();
  });

  it("an alias and a negation on the real CLI still work", async () => {
    const dir = join(await tempDir(), "d");
    const pushed = await cli(["push", "q", "a", "--no-stdin", "--batch=5", "--dir", dir]);
    expect(pushed.code, pushed.stderr).toBe(0);
    const purged = await cli(["purge", "q", "-y", "--dir", dir]);
    expect(purged.code, purged.stderr).toBe(0);
  });
});
