// Nuxt 4.3.1 (nitropack 2.13.6, h3 v1): playground/nuxt, built and run. Slow (npm ci on first run, nuxt build).
import { describeHost } from "./_suite";

describeHost({ dir: "nuxt", build: ["nuxt", "build"], envPrefix: "NUXT_" });
