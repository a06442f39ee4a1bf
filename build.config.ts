import { defineBuildConfig } from "unbuild";

export default defineBuildConfig({
  entries: [
    "src/index",
    { input: "adapters/cli", name: "cli" },
    { input: "adapters/node", name: "node" },
    { input: "adapters/drivers/fs", name: "drivers/fs" },
    { input: "adapters/drivers/memory", name: "drivers/memory" },
    { input: "adapters/drivers/unstorage", name: "drivers/unstorage" },
    { input: "adapters/storage", name: "storage" },
    { input: "runtime/index", name: "runtime/index" },
    { input: "adapters/server", name: "server" },
    { input: "client/index", name: "client" },
    { input: "adapters/nitro", name: "nitro" },
    { input: "adapters/nuxt", name: "nuxt" },
  ],
  declaration: "node16",
  rollup: { emitCJS: false },
});
