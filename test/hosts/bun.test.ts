// Nitro's `bun` preset: playground/nitro built with it and run by Bun (the npm `bun` package). Slow (a Nitro build).
import { join } from "pathe";
import { describeHost } from "./_suite";
import { BIN, presetApp } from "./_preset";

// The preset installs no SIGTERM handler: v-queue closes the queues, then raises the signal again.
describeHost(presetApp("bun", { start: { command: join(BIN, "bun"), args: ["run", ".output/server/index.mjs"] } }), { sigtermExit: "SIGTERM" });
