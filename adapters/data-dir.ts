import { mkdir, rm, stat, writeFile } from "node:fs/promises";
import { join, resolve } from "pathe";
import { ConfigError } from "./config-schema";

/**
 * Checks a data directory before anything uses it, so that a bad one is one clear error at
 * start rather than a failure (a 500, a stack) at the first write: it must be a directory;
 * with `create` a missing one is made; with `writable` a file must be creatable in it.
 */
export async function checkDataDir(dir: string, { create = false, writable = false } = {}): Promise<void> {
  const path = resolve(dir);
  const fail = (what: string, error?: NodeJS.ErrnoException): never => {
    throw new ConfigError([`Data directory ${path} ${what}${error ? ` (${error.code ?? error.message})` : ""}.`]);
  };
  const info = await stat(path).catch((error: NodeJS.ErrnoException) =>
    error.code === "ENOENT" || error.code === "ENOTDIR" ? undefined : fail("cannot be read", error),
  );
  if (info && !info.isDirectory()) fail("is not a directory");
  if (!info) {
    if (!create) return;
    await mkdir(path, { recursive: true }).catch((error: NodeJS.ErrnoException) => fail("cannot be created", error));
  }
  if (!writable) return;
  // access(W_OK) says yes to root on a read-only mount: only a real write tells.
  const probe = join(path, `.vq-write-check-${process.pid}`);
  await writeFile(probe, "").catch((error: NodeJS.ErrnoException) => fail("is not writable", error));
  await rm(probe, { force: true });
}
