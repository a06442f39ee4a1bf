// Nitro v3 (nitro 3.0.0, h3 v2): playground/nitro, built and run. Slow (npm ci on first run, nitro build).
import { describeHost } from "./_suite";

describeHost({ dir: "nitro", build: ["nitro", "build"], envPrefix: "NITRO_" });
