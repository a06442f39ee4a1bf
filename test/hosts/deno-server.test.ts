/**
 * Nitro's `deno-server` preset: playground/nitro built with it and run by Deno (the npm `deno`, from
 * test/helpers/tools.ts). Not the generated `deno task --config .output/deno.json start`: it lacks
 * --allow-sys (the fs driver's lock files name the host) and --allow-run (signal 0 to the pid in
 * a lock file: without it a crashed server's locks are never taken over). Slow (a Nitro build).
 */
import { runtimeBinary } from "../helpers/runtime";
import { describeHost } from "./_suite";
import { presetApp } from "./_preset";

const FLAGS = ["--allow-net", "--allow-read", "--allow-write", "--allow-env", "--allow-sys", "--allow-run", "--unstable-byonm", "--unstable-node-globals"];

// Deno reads /proc/self only with --allow-all (no process_open_fds); no SIGTERM handler in the preset (as bun).
describeHost(presetApp("deno-server", { start: { command: runtimeBinary("deno"), args: ["run", ...FLAGS, "./server/index.mjs"], in: ".output" } }), {
  openFds: false,
  sigtermExit: "SIGTERM",
});
