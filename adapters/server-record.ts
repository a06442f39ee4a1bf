/**
 * Where the servers of this host and user listen, by data directory, for the CLI to name one
 * when a directory's files are held (`E_LOCKED`). Each server writes a record in the temp
 * directory (not the data directory: its files are the crate's): its owner line (`pid start
 * host`, as a lock's), the directory's real path and its URL; it removes it on close. A record
 * whose process is gone (kill -9) is not believed, and is removed when read.
 */
import { mkdir, readdir, readFile, realpath, rename, unlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "pathe";
import { isOwnerAlive, myOwnerLine } from "./drivers/utils/pid-lock";

const recordsDir = (): string => join(tmpdir(), `v-queue-servers-${process.getuid?.() ?? "user"}`);
const WILDCARD = /^http:\/\/(0\.0\.0\.0|\[::\]):/;

const realDir = (dir: string): Promise<string> => realpath(dir).catch(() => resolve(dir));

/** Records that this process serves `dir` at `url`; the function returned removes the record. */
export async function recordServer(dir: string, url: string, port: number): Promise<() => Promise<void>> {
  await mkdir(recordsDir(), { recursive: true });
  const path = join(recordsDir(), `${process.pid}~${port}`);
  // A wildcard host is reached on loopback from this host (the records are this host's).
  // Whole or not at all: a reader never sees it half written (and takes no `.tmp` for a record).
  await writeFile(`${path}.tmp`, `${await myOwnerLine()}${await realDir(dir)}\n${url.replace(WILDCARD, "http://127.0.0.1:")}\n`);
  await rename(`${path}.tmp`, path);
  return () => unlink(path).catch(() => {});
}

/** The URLs of the live servers of `dir`, as recorded. */
export async function serversOf(dir: string): Promise<string[]> {
  const names = await readdir(recordsDir()).catch(() => [] as string[]);
  const wanted = await realDir(dir);
  const urls: string[] = [];
  for (const name of names.filter((n) => !n.endsWith(".tmp")).sort()) {
    const path = join(recordsDir(), name);
    const [owner = "", served = "", url = ""] = (await readFile(path, "utf8").catch(() => "")).split("\n");
    if (!(await isOwnerAlive(owner, path).catch(() => true))) {
      await unlink(path).catch(() => {});
      continue;
    }
    if (served === wanted && url.startsWith("http")) urls.push(url);
  }
  return urls;
}
