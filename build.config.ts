import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Plugin } from "rollup";
import { defineBuildConfig } from "unbuild";

/**
 * The engine's QueueWriter and QueueConsumer declare `[Symbol.asyncDispose]`, a symbol that
 * TypeScript knows from @types/node or lib "esnext.disposable" only: a project with neither
 * (a browser app on lib ES2022) failed on our .d.mts under `skipLibCheck: false`. Those
 * declarations now declare the symbol themselves, as @types/node does (so either merges).
 */
const declareAsyncDispose: Plugin = {
  name: "v-queue:declare-async-dispose",
  renderChunk: (code) =>
    code.includes("[Symbol.asyncDispose]")
      ? `${code}\ndeclare global {\n    interface SymbolConstructor {\n        readonly asyncDispose: unique symbol;\n    }\n}\n`
      : null,
};

export default defineBuildConfig({
  entries: [
    "src/index",
    { input: "adapters/cli", name: "cli" },
    { input: "adapters/node", name: "node" },
    { input: "adapters/drivers/fs", name: "drivers/fs" },
    { input: "adapters/drivers/memory", name: "drivers/memory" },
    { input: "adapters/drivers/unstorage", name: "drivers/unstorage" },
    { input: "adapters/drivers/redis", name: "drivers/redis" },
    { input: "adapters/drivers/durable-object", name: "drivers/durable-object" },
    { input: "adapters/cloudflare", name: "cloudflare" },
    { input: "adapters/storage", name: "storage" },
    { input: "adapters/zstd-native", name: "zstd-native" },
    { input: "runtime/index", name: "runtime/index" },
    { input: "adapters/server", name: "server" },
    { input: "client/index", name: "client" },
    { input: "adapters/nitro", name: "nitro" },
    { input: "adapters/nuxt", name: "nuxt" },
  ],
  // workerd's own module (the Durable Object base class of v-queue/cloudflare): resolved by workerd, never bundled.
  externals: ["cloudflare:workers"],
  declaration: "node16",
  // citty is the CLI's alone and small: inlined into dist/cli.mjs, so an app that mounts the module does not install it.
  rollup: { emitCJS: false, inlineDependencies: ["citty"] },
  hooks: {
    "rollup:dts:options": (_ctx, options) => {
      options.plugins.push(declareAsyncDispose);
    },
    // Nitro's generated `nitro-imports.d.ts` reads the auto-imported `useVQueue` from `dist/nitro`
    // (no extension), which TypeScript answers with a `.d.ts`, never the `.d.mts` (adapters/nitro.ts).
    "build:done": (ctx) => {
      writeFileSync(join(ctx.options.outDir, "nitro.d.ts"), `export * from "./nitro.mjs";\nexport { default } from "./nitro.mjs";\n`);
    },
  },
});
