/**
 * The package as npm publishes it: `npm pack` of the built checkout, kept in `.tmp/` (git-ignored)
 * under a hash of what goes into it (package.json, README, dist/, bin/): the next test file, or the
 * next run on the same build, takes the same tarball. Needs dist/ (`npm run build`); packed with
 * --ignore-scripts: no prepack rebuild, other suites may be reading dist/.
 */
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { mkdir, mkdtemp, rename, rm } from "node:fs/promises";
import { promisify } from "node:util";
import { join, resolve } from "pathe";

const run = promisify(execFile);
const ROOT = resolve(import.meta.dirname, "../..");
export const TMP = join(ROOT, ".tmp");

let contentHash: string | undefined;

/**
 * sha-1 of the files `npm pack` takes (as in package.json's `files`, plus the manifest and README),
 * read once per test process: a file edited during the run does not split one run over two tarballs.
 */
export function packedContentHash(): string {
  if (contentHash) return contentHash;
  const hash = createHash("sha1");
  const files = [
    "package.json",
    "README.md",
    ...["dist", "bin"].flatMap((dir) => readdirSync(join(ROOT, dir), { recursive: true, encoding: "utf8" }).map((name) => `${dir}/${name}`)),
  ];
  for (const file of files.sort()) {
    const path = join(ROOT, file);
    if (!statSync(path).isFile()) continue;
    hash.update(`${file}\0`).update(readFileSync(path)).update("\0");
  }
  return (contentHash = hash.digest("hex").slice(0, 16));
}

let packing: Promise<string> | undefined;

/** The path of the packed tarball of this build, `.tmp/v-queue-<hash>.tgz`; packed when missing. */
export function packedTarball(): Promise<string> {
  if (!packing) {
    packing = pack(join(TMP, `v-queue-${packedContentHash()}.tgz`));
    packing.catch(() => (packing = undefined));
  }
  return packing;
}

async function pack(tarball: string): Promise<string> {
  if (existsSync(tarball)) return tarball;
  await mkdir(TMP, { recursive: true });
  const work = await mkdtemp(join(TMP, "pack-"));
  try {
    const { stdout } = await run("npm", ["pack", "--ignore-scripts", "--json", "--pack-destination", work], {
      cwd: ROOT,
      timeout: 120_000,
      maxBuffer: 64 << 20,
    });
    const [{ filename }] = JSON.parse(stdout) as [{ filename: string }];
    // Renamed into place: test files packing at once never read half a tarball.
    await rename(join(work, filename), tarball);
  } finally {
    await rm(work, { recursive: true, force: true });
  }
  return tarball;
}
