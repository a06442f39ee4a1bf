/**
 * playground/nitro built with another Nitro preset: its config and routes copied into a
 * temporary folder (the playground's node_modules linked), so that a preset's build and the
 * playground's own (nitro.test.ts) can run at once without sharing `.nitro` and `.output`.
 */
import { cpSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "pathe";
import { afterAll } from "vitest";
import { ROOT, type HostApp } from "./_host";

const PLAYGROUND = join(ROOT, "playground/nitro");

export interface PresetOptions {
  /** The built server's command (see HostApp.start); none for a preset run in-process (Miniflare). */
  start?: HostApp["start"];
  /** `--no-minify` (cloudflare-module minifies with @rollup/plugin-terser, which is not installed). */
  noMinify?: boolean;
  /** Files added to the copy (e.g. `wrangler.json`), by path in it. */
  files?: Record<string, string>;
}

/** A copy of the playground built with `nitro build --preset <preset>`; removed after the file's tests. */
export function presetApp(preset: string, options: PresetOptions = {}): HostApp {
  const cwd = mkdtempSync(join(tmpdir(), `vq-preset-${preset}-`));
  afterAll(() => rmSync(cwd, { recursive: true, force: true }));
  for (const entry of ["package.json", "nitro.config.ts", "routes"]) cpSync(join(PLAYGROUND, entry), join(cwd, entry), { recursive: true });
  for (const [path, text] of Object.entries(options.files ?? {})) writeFileSync(join(cwd, path), text);
  // Installed by buildApp when missing; the link may point at nothing until then.
  symlinkSync(join(PLAYGROUND, "node_modules"), join(cwd, "node_modules"), "dir");
  const build = ["nitro", "build", "--preset", preset, ...(options.noMinify ? ["--no-minify"] : [])];
  return { dir: "nitro", name: `nitro ${preset}`, build, envPrefix: "NITRO_", cwd, start: options.start };
}
