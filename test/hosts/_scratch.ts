/**
 * Apps written from scratch in the tests (not the playgrounds): their files in a temporary
 * folder with a playground's installed node_modules linked in, built once per file and run.
 */
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "pathe";
import { afterAll, beforeAll, expect } from "vitest";
import { buildApp, ROOT, startApp, type HostApp, type RunningHost } from "./_host";
import { sleep } from "../helpers/sleep";

/** A folder with `files` (path -> source) and playground/`playground`'s node_modules linked; removed after the file's tests. */
export function scratchApp(playground: "nitro" | "nuxt", files: Record<string, string>): string {
  const cwd = mkdtempSync(join(tmpdir(), `vq-${playground}-app-`));
  afterAll(() => rmSync(cwd, { recursive: true, force: true }));
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(join(cwd, path, ".."), { recursive: true });
    writeFileSync(join(cwd, path), text);
  }
  symlinkSync(join(ROOT, "playground", playground, "node_modules"), join(cwd, "node_modules"), "dir");
  return cwd;
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
