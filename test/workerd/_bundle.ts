/**
 * Bundles a Worker entry for workerd with rolldown (the bundler vite already brings): ESM, for the
 * browser platform (no Node built-ins), `cloudflare:*` left to workerd. zstd-codec is replaced by
 * a module that refuses: it generates code from strings, which workerd forbids, and no zstd
 * package runs there; queues without compression never load it.
 *
 * The bundle is kept in `.tmp/workerd-bundles` (git-ignored) with the content hash of every module
 * it holds: the next test file, or the next run, takes it while none of them changed.
 */
import { createHash } from "node:crypto";
import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join, resolve } from "pathe";
import { rolldown } from "rolldown";

const NO_ZSTD =
  "export const ZstdCodec = { run() { throw new Error('zstd is not available in workerd: use queues without compression there.'); } }; export default { ZstdCodec };";
const CACHE_DIR = resolve(import.meta.dirname, "../../.tmp/workerd-bundles");

interface Cached {
  /** sha-1 of each module file the bundle holds. */
  modules: Record<string, string>;
  code: string;
}

const cache = new Map<string, Promise<string>>();

const hashOf = (text: string | Buffer) => createHash("sha1").update(text).digest("hex");

function fileHash(path: string): string | undefined {
  try {
    return hashOf(readFileSync(path));
  } catch {
    return undefined;
  }
}

/** The cache file of `entry`, named by the entry and by what makes the bundle besides its modules (this file, rolldown). */
export function cacheFile(entry: string): string {
  const rolldownVersion = (JSON.parse(readFileSync(resolve(import.meta.dirname, "../../node_modules/rolldown/package.json"), "utf8")) as { version: string })
    .version;
  return join(CACHE_DIR, `${hashOf([entry, fileHash(import.meta.filename), rolldownVersion].join("\n"))}.json`);
}

function readCached(file: string): string | undefined {
  try {
    const cached = JSON.parse(readFileSync(file, "utf8")) as Cached;
    return Object.entries(cached.modules).every(([path, hash]) => fileHash(path) === hash) ? cached.code : undefined;
  } catch {
    return undefined;
  }
}

async function bundle(entry: string): Promise<Cached> {
  const build = await rolldown({
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
  const { output } = await build.generate({ format: "esm", codeSplitting: false });
  await build.close();
  const chunk = output[0];
  // Virtual modules (\0no-zstd) are made by this file, whose hash names the cache file.
  const modules = Object.fromEntries(chunk.moduleIds.filter((id) => !id.startsWith("\0")).map((id) => [id, fileHash(id) ?? ""]));
  return { modules, code: chunk.code };
}

/** The bundled script of `entry`: from `.tmp/workerd-bundles` while its modules are unchanged, else bundled and kept there. */
export async function bundleThroughDisk(entry: string): Promise<string> {
  const file = cacheFile(entry);
  const kept = readCached(file);
  if (kept !== undefined) return kept;
  const made = await bundle(entry);
  // Written aside and renamed: test files that bundle at once never read half a file.
  mkdirSync(CACHE_DIR, { recursive: true });
  const staging = `${file}.${process.pid}.tmp`;
  writeFileSync(staging, JSON.stringify(made));
  renameSync(staging, file);
  return made.code;
}

/** The bundled script of `entry` (cached per test process too). */
export function bundleWorker(entry: string): Promise<string> {
  let script = cache.get(entry);
  if (!script) {
    script = bundleThroughDisk(entry);
    cache.set(entry, script);
  }
  return script;
}
