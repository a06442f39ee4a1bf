/**
 * Bundles a Worker entry for workerd with rolldown (the bundler vite already brings): ESM, for the
 * browser platform (no Node built-ins), `cloudflare:*` left to workerd. zstd-codec is replaced by
 * a module that refuses: it generates code from strings, which workerd forbids, and no zstd
 * package runs there; queues without compression never load it.
 */
import { rolldown } from "rolldown";

const NO_ZSTD = "export const ZstdCodec = { run() { throw new Error('zstd is not available in workerd: use queues without compression there.'); } }; export default { ZstdCodec };";

const cache = new Map<string, Promise<string>>();

/** The bundled script of `entry` (cached per test process). */
export function bundleWorker(entry: string): Promise<string> {
  let script = cache.get(entry);
  if (!script) {
    script = (async () => {
      const bundle = await rolldown({
        input: entry,
        platform: "browser",
        external: [/^cloudflare:/],
        logLevel: "silent",
        plugins: [
          {
            name: "v-queue:no-zstd",
            resolveId: (id) => (id === "zstd-codec" ? "\0no-zstd" : undefined),
            load: (id) => (id === "\0no-zstd" ? NO_ZSTD : undefined),
          },
        ],
      });
      const { output } = await bundle.generate({ format: "esm", codeSplitting: false });
      await bundle.close();
      return output[0].code;
    })();
    cache.set(entry, script);
  }
  return script;
}
