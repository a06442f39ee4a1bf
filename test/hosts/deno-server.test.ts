/**
 * Nitro's `deno-server` preset: playground/nitro built with it and run by Deno (the npm `deno`
 * package). Not the generated `deno task --config .output/deno.json start`: it lacks
 * --allow-sys, and the fs driver reads the hostname (for its lock files). Slow (a Nitro build).
 */
import { join } from "pathe";
import { describeHost } from "./_suite";
import { BIN, presetApp } from "./_preset";

export const DENO_FLAGS = ["--allow-net", "--allow-read", "--allow-write", "--allow-env", "--allow-sys", "--unstable-byonm", "--unstable-node-globals"];

// Deno reads /proc/self only with --allow-all (no process_open_fds); no SIGTERM handler in the preset (as bun).
describeHost(presetApp("deno-server", { start: { command: join(BIN, "deno"), args: ["run", ...DENO_FLAGS, "./server/index.mjs"], in: ".output" } }), { openFds: false, sigtermExit: "SIGTERM" });
