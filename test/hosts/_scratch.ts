/**
 * Apps written from scratch in the tests (not the playgrounds): their files in a temporary
 * folder, built once per file and run. Their node_modules is an install of the package as a user
 * gets it: the packed tarball, beside the playground's locked framework (nitro, nuxt).
 */
import { execFile } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { mkdir, mkdtemp, readdir, rename, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { promisify } from "node:util";
import { join } from "pathe";
import { afterAll, beforeAll, expect } from "vitest";
import { packedContentHash, packedTarball, TMP } from "../helpers/pack";
import { buildApp, ROOT, startApp, type HostApp, type RunningHost } from "./_host";
import { sleep } from "../helpers/sleep";

const run = promisify(execFile);
type Playground = "nitro" | "nuxt";

/** Where the app of `playground` is installed for this build: `.tmp/apps/<playground>-<tarball hash>`. */
export const installedAppDir = (playground: Playground): string => join(TMP, "apps", `${playground}-${packedContentHash()}`);

/** A folder with `files` (path -> source) and the installed app's node_modules linked (see `installApp`); removed after the file's tests. */
export function scratchApp(playground: Playground, files: Record<string, string>): string {
  const cwd = mkdtempSync(join(tmpdir(), `vq-${playground}-app-`));
  afterAll(() => rmSync(cwd, { recursive: true, force: true }));
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(join(cwd, path, ".."), { recursive: true });
    writeFileSync(join(cwd, path), text);
  }
  // Dangling until `installApp` has run (the build's install step, or a test's beforeAll).
  symlinkSync(join(installedAppDir(playground), "node_modules"), join(cwd, "node_modules"), "dir");
  return cwd;
}

const installs = new Map<string, Promise<string>>();

/**
 * Installs, once per tarball (a re-run of the same build reuses it), playground/`playground`'s
 * package.json and lock with v-queue from the packed tarball instead of `file:../..`: the
 * framework as the lock says (npm's cache, `--prefer-offline`), v-queue's own dependencies as npm
 * resolves them for a user. Returns the app's folder.
 */
export function installApp(playground: Playground): Promise<string> {
  const dir = installedAppDir(playground);
  let installed = installs.get(dir);
  if (!installed) {
    installed = install(playground, dir);
    installs.set(dir, installed);
    installed.catch(() => installs.delete(dir));
  }
  return installed;
}

async function install(playground: Playground, dir: string): Promise<string> {
  if (existsSync(join(dir, "node_modules", ".package-lock.json"))) return dir;
  const spec = `file:${await packedTarball()}`;
  const source = join(ROOT, "playground", playground);
  const pkg = JSON.parse(readFileSync(join(source, "package.json"), "utf8")) as { dependencies: Record<string, string> };
  pkg.dependencies["v-queue"] = spec;
  const lock = JSON.parse(readFileSync(join(source, "package-lock.json"), "utf8")) as { packages: Record<string, { dependencies?: Record<string, string> }> };
  // The link to this checkout goes: npm resolves the tarball's dependencies afresh.
  delete lock.packages["../.."];
  delete lock.packages["node_modules/v-queue"];
  lock.packages[""]!.dependencies!["v-queue"] = spec;
  await mkdir(join(TMP, "apps"), { recursive: true });
  const work = await mkdtemp(`${dir}.`);
  try {
    await writeFile(join(work, "package.json"), JSON.stringify(pkg, null, 2));
    await writeFile(join(work, "package-lock.json"), JSON.stringify(lock, null, 2));
    await run("npm", ["install", "--prefer-offline", "--no-audit", "--no-fund"], { cwd: work, timeout: 600_000, maxBuffer: 64 << 20 });
    // Renamed into place: a test file installing the same app at once keeps its own, or this one.
    await rename(work, dir).catch((error: unknown) => {
      if (!existsSync(join(dir, "node_modules", ".package-lock.json"))) throw error;
    });
  } finally {
    await rm(work, { recursive: true, force: true });
  }
  // The installs of earlier builds (a Nuxt app is hundreds of MB).
  for (const name of await readdir(join(TMP, "apps"))) {
    if (name.startsWith(`${playground}-`) && join(TMP, "apps", name) !== dir && !name.includes("."))
      await rm(join(TMP, "apps", name), { recursive: true, force: true });
  }
  return dir;
}

type LockPackages = Record<
  string,
  {
    version: string;
    resolved?: string;
    dependencies?: Record<string, string>;
    optionalDependencies?: Record<string, string>;
    peerDependencies?: Record<string, string>;
    peerDependenciesMeta?: Record<string, { optional?: boolean }>;
  }
>;

/** Where Node finds package `name` from the package at `path` (paths as in a lockfile: `node_modules/a/node_modules/b`). */
function resolveIn(packages: LockPackages, path: string, name: string): string | undefined {
  for (let dir = path; ; dir = dir.replace(/\/?node_modules\/(@[^/]+\/)?[^/]+$/, "")) {
    const candidate = `${dir ? `${dir}/` : ""}node_modules/${name}`;
    if (candidate in packages) return candidate;
    if (!dir) return undefined;
  }
}

/** The installed packages `from` needs: its dependencies and required peers (npm installs those; an optional one is the app's choice), theirs, and so on. */
function needs(packages: LockPackages, from: string): string[] {
  const seen = new Set<string>();
  const todo = [from];
  while (todo.length > 0) {
    const path = todo.pop()!;
    if (seen.has(path)) continue;
    seen.add(path);
    const entry = packages[path];
    const peers = Object.keys(entry?.peerDependencies ?? {}).filter((name) => !entry?.peerDependenciesMeta?.[name]?.optional);
    for (const name of [...Object.keys({ ...entry?.dependencies, ...entry?.optionalDependencies }), ...peers]) {
      const found = resolveIn(packages, path, name);
      if (found) todo.push(found);
    }
  }
  return [...seen];
}

/**
 * v-queue in the installed app is the packed tarball; what it brings holds one h3 (v2) and none of
 * the CLI's packages; every other h3 of the app is the framework's own (Nitro 3.0.0 pins h3
 * 2.0.1-rc.2, Nuxt 4 runs on h3 v1).
 */
export function expectLeanInstall(playground: Playground): void {
  const packages = (JSON.parse(readFileSync(join(installedAppDir(playground), "node_modules", ".package-lock.json"), "utf8")) as { packages: LockPackages })
    .packages;
  expect(packages["node_modules/v-queue"]?.resolved).toMatch(/^file:.*\/v-queue-\w+\.tgz$/);
  const h3 = (paths: string[]) => paths.filter((path) => /(^|\/)node_modules\/h3$/.test(path));
  const ours = needs(packages, "node_modules/v-queue");
  expect(h3(ours).map((path) => packages[path]!.version)).toEqual([expect.stringMatching(/^2\./)]);
  const names = ours.map((path) => path.replace(/^.*node_modules\//, ""));
  for (const cliOnly of ["listhen", "c12", "citty"]) expect(names).not.toContain(cliOnly);
  const framework = needs(packages, `node_modules/${playground}`);
  expect(h3(Object.keys(packages)).sort()).toEqual([...new Set([...h3(ours), ...h3(framework)])].sort());
}

/** Builds and starts `app` before the file's tests, stops it after them; `host()` is the running server. */
export function useRunningApp(app: HostApp): () => RunningHost {
  let host: RunningHost | undefined;
  beforeAll(async () => {
    await buildApp(app);
    host = await startApp(app);
  }, 600_000);
  afterAll(async () => {
    if (host?.running()) await host.stop().catch(() => host!.kill());
  });
  return () => host!;
}

/** Waits (20 s at most) until `GET <donePath>` lists job-0 .. job-<count - 1>, each once. */
export async function expectJobsDone(host: RunningHost, donePath: string, count: number): Promise<void> {
  const deadline = Date.now() + 20_000;
  let done: string[] = [];
  while (done.length < count && Date.now() < deadline) {
    done = ((await (await fetch(`${host.url}${donePath}`)).json()) as { done: string[] }).done;
    await sleep(100);
  }
  expect(done.sort()).toEqual(Array.from({ length: count }, (_, i) => `job-${i}`).sort());
}
