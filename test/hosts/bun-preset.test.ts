// Nitro's `bun` preset: playground/nitro built with it and run by Bun (the npm `bun` package, from test/helpers/tools.ts). Slow (a Nitro build).
import { runtimeBinary } from "../helpers/runtime";
import { describeHost } from "./_suite";
import { presetApp } from "./_preset";

// The preset installs no SIGTERM handler: v-queue closes the queues, then raises the signal again.
describeHost(presetApp("bun", { start: { command: runtimeBinary("bun"), args: ["run", ".output/server/index.mjs"] } }), { sigtermExit: "SIGTERM" });
