/**
 * Every fenced block of README.md and docs/*.md, by its language: TypeScript and JavaScript
 * type-checked (all pages in one tsc run, each block a module, `v-queue/...` resolving to the
 * built package's dist/ types as in a user's project) and run where self-contained (importing
 * only v-queue and node:); shell blocks' `npx v-queue`/`curl` commands run in order in an empty
 * folder per page, against the page's own server (a server or a follower: seen running, then
 * stopped). The line before a fence may say: `<!-- not run: why -->`, `<!-- type-checked, not
 * run: why -->`, `<!-- continues the block above -->` (one module with it), `<!-- saved as name -->`
 * (a file in the page's folder), `<!-- answer to: GET path -->` (a JSON answer shown, compared
 * with the server's); a block without one that the test cannot run fails, naming its line, and is
 * never started. A `<lease>` placeholder gets a real lease token. dist/ first (`npm run build`).
 */
import { execFile, spawn } from "node:child_process";
import { chmodSync, mkdirSync, readdirSync, writeFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { join, resolve } from "pathe";
import { describe, expect, it } from "vitest";
import { createClient } from "../../client";
import { BIN, useServer } from "../cli/_cli";
import { useScripts } from "../helpers/doc-scripts";
import { freePort } from "../helpers/net";
import { projectFile } from "../helpers/readme";
import { sleep } from "../helpers/sleep";
import { useTempDirs } from "../helpers/tmp";

const run = promisify(execFile);
const ROOT = resolve(import.meta.dirname, "../..");
/** The address the docs' examples name; the test points it at its own server. */
const DOC_URL = "http://127.0.0.1:9093";
/** Runs a TypeScript block as Node runs the project's own scripts (the page's folder has no node_modules). */
const JITI = pathToFileURL(join(ROOT, "node_modules/jiti/lib/jiti-register.mjs")).href;
/** In JavaScript nothing can be annotated: a value typed unknown, or a parameter typed any, is no error of the doc. */
const UNTYPED_IN_JS = /error TS(18046|7006|7031):/;
const PAGES = ["README.md", ...readdirSync(join(ROOT, "docs"), "utf8").map((name) => `docs/${name}`)].filter((page) => page.endsWith(".md"));

type Marker = { kind: "not run" | "type-checked, not run" | "continues" | "saved as" | "answer to"; text: string };
interface Block {
  page: string;
  /** The fence's line (1-based). */
  line: number;
  lang: string;
  code: string;
  marker?: Marker;
}

const MARKER = /^<!-- (not run|type-checked, not run|continues the block above|saved as|answer to)(?::? (.*?))? -->$/;
/** Which blocks each marker may stand before. */
const MARKED: Record<Marker["kind"], (block: Block) => boolean> = {
  "not run": () => true,
  "type-checked, not run": (block) => isCode(block),
  continues: (block) => isCode(block),
  "saved as": (block) => /^[\w.-]+$/.test(block.marker!.text),
  "answer to": (block) => block.lang === "json" && /^GET \/\S+$/.test(block.marker!.text),
};

function blocksOf(page: string): Block[] {
  const lines = projectFile(page).split("\n");
  const blocks: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\S*)$/.exec(lines[i]!);
    if (!open) continue;
    const end = lines.indexOf("```", i + 1);
    expect(end, `${page}:${i + 1}: an unclosed fence`).toBeGreaterThan(i);
    const found = MARKER.exec(lines[i - 1] ?? "");
    const kind = found?.[1] === "continues the block above" ? "continues" : (found?.[1] as Marker["kind"] | undefined);
    blocks.push({ page, line: i + 1, lang: open[1]!, code: lines.slice(i + 1, end).join("\n") + "\n", marker: kind && { kind, text: found![2] ?? "" } });
    i = end;
  }
  return blocks;
}

const where = (block: Block) => `${block.page}:${block.line}`;
const blocks = PAGES.flatMap(blocksOf);
const isCode = (block: Block) => block.lang === "ts" || block.lang === "js";

/** The modules of the code blocks: a block that continues the one above joins its module. */
function modules(): { head: Block; source: string; lines: { block: Block; from: number }[] }[] {
  const out: ReturnType<typeof modules> = [];
  for (const block of blocks.filter(isCode)) {
    if (block.marker?.kind === "not run") continue;
    const last = out.at(-1);
    if (block.marker?.kind === "continues") {
      expect(last?.head.page, `${where(block)}: continues no code block of its page`).toBe(block.page);
      last!.lines.push({ block, from: last!.source.split("\n").length });
      last!.source += block.code;
    } else out.push({ head: block, source: block.code, lines: [{ block, from: 1 }] });
  }
  return out;
}

const moduleName = (head: Block) => `${head.page.replace(/[/.]/g, "-")}-L${head.line}.${head.lang === "js" ? "mjs" : "mts"}`;

/** Splits a shell block into its commands: comments and blank lines out, continued lines joined. */
function commandsOf(code: string): string[] {
  return code
    .replaceAll("\\\n", " ")
    .split("\n")
    .map((line) => line.replace(/(^|\s+)#(\s.*)?$/, "").trim())
    .filter(Boolean);
}

/** A command the test runs: each stage of its pipeline one of these programs. */
const RUNNABLE = /^(npx v-queue|v-queue|curl|printf|seq|echo)\b/;
/** Why the test does not run a program: one that imports more than v-queue and Node's modules is not self-contained. */
function whyNotRunCode(source: string): string | undefined {
  const other = [...source.matchAll(/\bfrom "([^"]+)"/g)].map((m) => m[1]!).find((name) => !/^(v-queue(\/.*)?|node:.*)$/.test(name));
  if (other) return `imports "${other}", not run: mark the block <!-- not run: why --> or <!-- type-checked, not run: why -->`;
}

/** Why the test does not run `command`, if it does not. */
function whyNotRun(command: string): string | undefined {
  if (!command.split(/\s*\|\s*/).every((stage) => RUNNABLE.test(stage))) return `cannot run \`${command}\`: mark the block <!-- not run: why -->`;
  // Nothing outside the page's folder is written (the tests may run as root).
  if (/(^|\s)\/\S/.test(command)) return `\`${command}\` names a path outside the page's folder`;
  // Only the test's server is asked: no request leaves the machine.
  if (/\bcurl\b/.test(command) && !command.includes(DOC_URL)) return `\`${command}\` asks another server than ${DOC_URL}`;
}

/** Runs until stopped (a server, a follower): started, seen running, then stopped. */
const FOLLOWS = /(^|\s)(serve|tail|-f|--follow|--watch|-w)(\s|$)/;

describe("every block of the docs", () => {
  const tempDir = useTempDirs("vq-doc-blocks-");
  const script = useScripts();

  it("each block runs, or says why not with a marker before its fence", () => {
    const unrunnable: string[] = [];
    for (const block of blocks) {
      if (block.marker && block.marker.kind !== "continues" && !block.marker.text.trim()) unrunnable.push(`${where(block)}: the marker gives no reason`);
      else if (block.marker && !MARKED[block.marker.kind](block))
        unrunnable.push(`${where(block)}: <!-- ${block.marker.kind} --> does not fit a ${block.lang || "plain"} block`);
      if (block.marker) continue;
      if (isCode(block)) {
        const why = whyNotRunCode(block.code);
        if (why) unrunnable.push(`${where(block)}: ${why}`);
        continue;
      }
      if (block.lang === "sh" || block.lang === "bash") {
        for (const command of commandsOf(block.code)) {
          const why = whyNotRun(command);
          if (why) unrunnable.push(`${where(block)}: ${why}`);
        }
        continue;
      }
      unrunnable.push(`${where(block)}: a ${block.lang || "plain"} block is not run: mark it <!-- not run: why -->`);
    }
    expect(unrunnable).toEqual([]);
  });

  it("the TypeScript and JavaScript blocks type-check against dist/'s types", { timeout: 120_000 }, async () => {
    const all = modules();
    const dir = resolve(script("tsconfig.json", ""), "..");
    mkdirSync(join(dir, "check"), { recursive: true });
    for (const module of all) {
      // A block with neither import nor export would be a script: top-level await needs a module.
      writeFileSync(join(dir, "check", moduleName(module.head)), `${module.source}export {};\n`);
    }
    writeFileSync(join(dir, "check", "your-code.d.ts"), PLACEHOLDERS);
    writeFileSync(
      join(dir, "check", "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          strict: true,
          module: "nodenext",
          moduleResolution: "nodenext",
          target: "es2022",
          lib: ["es2022"],
          noEmit: true,
          skipLibCheck: true,
          allowJs: true,
          checkJs: true,
          types: ["node"],
        },
        include: ["*.mts", "*.mjs", "*.d.ts"],
      }),
    );
    const result = await run(join(ROOT, "node_modules/.bin/tsc"), ["-p", join(dir, "check"), "--pretty", "false"], { cwd: dir }).then(
      () => "",
      (error: { stdout: string }) => error.stdout,
    );
    // Each error named by its page and line.
    const errors = result
      .split("\n")
      .filter((line) => /^\S+\(\d+,\d+\): error/.test(line))
      .map((line) => {
        const [, file, row, rest] = /^(?:.*\/)?([^/(]+)\((\d+),\d+\): (.*)$/.exec(line)!;
        const module = all.find((m) => moduleName(m.head) === file);
        if (!module) return line;
        if (module.head.lang === "js" && UNTYPED_IN_JS.test(line)) return "";
        const part = module.lines.findLast((l) => l.from <= Number(row))!;
        return `${part.block.page}:${part.block.line + Number(row) - part.from + 1}: ${rest}`;
      })
      .filter(Boolean);
    expect(errors).toEqual([]);
  });

  for (const page of PAGES) {
    const ofPage = blocks.filter((block) => block.page === page && !block.marker);
    const code = modules().filter((m) => m.head.page === page && !m.head.marker);
    const shells = ofPage.filter((block) => block.lang === "sh" || block.lang === "bash");
    const answers = blocks.filter((block) => block.page === page && block.marker?.kind === "answer to");
    if (code.length + shells.length + answers.length === 0) continue;
    describe(page, () => {
      // Its own server: a page runs alone (-t) as in the whole file.
      const server = useServer(tempDir);
      it("its blocks run in order in an empty folder, against a real server", { timeout: 180_000 }, async () => {
        const cwd = tempDir();
        const env = { ...process.env, URL: server.url, PATH: `${shims()}:${process.env.PATH}` };
        for (const saved of blocks.filter((block) => block.page === page && block.marker?.kind === "saved as"))
          writeFileSync(join(cwd, saved.marker!.text), saved.code);
        for (const block of blocks.filter((b) => b.page === page && (!b.marker || b.marker.kind === "answer to"))) {
          if (block.marker) {
            // An answer shown: the server's, at this point of the page, has the same fields of the same types.
            const res = await fetch(server.url + block.marker.text.slice("GET ".length));
            expect(shape(await res.json()), `${where(block)}: the answer to ${block.marker.text}`).toEqual(shape(JSON.parse(block.code)));
            continue;
          }
          if (isCode(block)) {
            const module = code.find((m) => m.head === block)!;
            const why = whyNotRunCode(module.source);
            if (why) throw new Error(`${where(block)}: ${why}`);
            const path = script(moduleName(block).replace(".mts", ".ts"), module.source.replaceAll(DOC_URL, server.url));
            const args = block.lang === "ts" ? ["--import", JITI, path] : [path];
            await run(process.execPath, args, { cwd, env, timeout: 30_000 }).catch((error: { stderr?: string; message: string }) => {
              throw new Error(`${where(block)}: ${error.stderr || error.message}`);
            });
          } else if (block.lang === "sh" || block.lang === "bash") {
            for (const command of commandsOf(block.code)) {
              // Never run (the test above fails for it): an unmarked `npm install` or `apt-get` installs nothing here.
              const why = whyNotRun(command);
              if (why) throw new Error(`${where(block)}: ${why}`);
              await runCommand(block, await withLeases(server.url, command.replaceAll(DOC_URL, server.url)), cwd, env);
            }
          }
        }
      });
    });
  }

  /**
   * `command` with each `<lease>` (a placeholder for a token that `lease` printed) replaced by a
   * real one: a message produced to the command's queue on the server, leased by its consumer.
   */
  async function withLeases(url: string, command: string): Promise<string> {
    if (!command.includes("<lease>")) return command;
    const [, queue, consumer] = /\b(?:ack|nack|extend) (\S+) (\S+) /.exec(command)!;
    const vq = createClient({ baseURL: url });
    let filled = command;
    while (filled.includes("<lease>")) {
      await vq.produce(queue!, "a message to lease");
      const [leased] = await vq.lease(queue!, consumer!, { max: 1, timeoutMs: 5000 });
      filled = filled.replace("<lease>", leased!.lease);
    }
    return filled;
  }

  let shimDir: string | undefined;
  /** A PATH folder where `npx v-queue` is the built CLI (no other npx: the blocks install nothing). */
  function shims(): string {
    if (shimDir) return shimDir;
    const dir = resolve(script("npx", ""), "..");
    writeFileSync(
      join(dir, "npx"),
      `#!/bin/sh\nif [ "$1" = v-queue ]; then shift; exec "${process.execPath}" "${BIN}" "$@"; fi\necho "npx $1: not run by the docs' test" >&2; exit 127\n`,
    );
    writeFileSync(join(dir, "v-queue"), `#!/bin/sh\nexec "${process.execPath}" "${BIN}" "$@"\n`);
    for (const name of ["npx", "v-queue"]) chmodSync(join(dir, name), 0o755);
    return (shimDir = dir);
  }

  async function runCommand(block: Block, command: string, cwd: string, env: NodeJS.ProcessEnv): Promise<void> {
    if (!FOLLOWS.test(command)) {
      await run("bash", ["-o", "pipefail", "-c", command], { cwd, env, timeout: 30_000, maxBuffer: 64 << 20 }).catch(
        (error: { stdout?: string; stderr?: string; message: string }) => {
          throw new Error(`${where(block)}: \`${command}\` failed: ${error.stderr || error.stdout || error.message}`);
        },
      );
      return;
    }
    // A server on a free port (its own, not the docs' 9093), or a follower: it must still run after a while, then stop on Ctrl-C.
    const port = await freePort();
    const serve = /\bserve\b/.test(command);
    const started = serve
      ? command.replace(/--port \d+/, "").replace(/--bind \S+/, `--bind 127.0.0.1:${port}`) + (/--bind/.test(command) ? "" : ` --port ${port}`)
      : command;
    const child = spawn("bash", ["-c", `exec ${started}`], { cwd, env, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => (output += chunk));
    child.stderr.on("data", (chunk: Buffer) => (output += chunk));
    const exited = new Promise<number | null>((done) => child.once("close", done));
    let code: number | null | undefined;
    void exited.then((c) => (code = c));
    if (serve) {
      for (let answered = false; !answered; await sleep(100)) {
        if (code !== undefined) throw new Error(`${where(block)}: \`${command}\` exited (${code}): ${output}`);
        answered = await fetch(`http://127.0.0.1:${port}/health`).then(
          (res) => res.ok,
          () => false,
        );
      }
    } else await sleep(1000);
    if (code !== undefined) throw new Error(`${where(block)}: \`${command}\` exited (${code}) instead of following: ${output}`);
    child.kill("SIGINT");
    // Ctrl-C is a normal end: 0, or the signal itself when it came before the handler was set.
    const stopped = await exited;
    if (stopped !== 0 && stopped !== null) throw new Error(`${where(block)}: \`${command}\` ended with ${stopped} on Ctrl-C: ${output}`);
  }
});

/** The user's own code the blocks call: declared, not shown. */
const PLACEHOLDERS = `declare function handle(data: unknown): Promise<void>;
declare function ship(order: unknown): Promise<void>;
declare const order: { id: number; item: string };
declare const event: { type: string; user: number };
declare const signal: AbortSignal;
`;

/** A JSON value's fields and their types (an array by its first item), not its values. */
function shape(value: unknown): unknown {
  if (Array.isArray(value)) return value.length > 0 ? [shape(value[0])] : [];
  if (value && typeof value === "object")
    return Object.fromEntries(
      Object.entries(value)
        .map(([key, item]) => [key, shape(item)])
        .sort(([a], [b]) => (a! < b! ? -1 : 1)),
    );
  return value === null ? "null" : typeof value;
}
