import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

/**
 * Every reference the project makes to its own files resolves: the relative links of its
 * Markdown files, the `.md` files their text names, and the `.md` files (and `#anchors`) the
 * code names in its comments. An anchor must be a heading of that file, by GitHub's rules.
 */

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const CODE_DIRS = ["src", "runtime", "adapters", "client", "protocol", "dashboard", "scripts", "bench", "bin"];
const CODE_FILE = /\.(ts|mts|js|mjs|vue|html|css)$/;
const SKIPPED_DIRS = new Set(["node_modules", "dist", "coverage", "tmp"]);

/** Files under `dir` (relative to the root) whose names match, skipping build output and dot folders. */
function walk(dir: string, match: RegExp): string[] {
  const out: string[] = [];
  const full = join(ROOT, dir);
  if (!existsSync(full)) return out;
  for (const entry of readdirSync(full, { withFileTypes: true })) {
    if (entry.name.startsWith(".") || SKIPPED_DIRS.has(entry.name)) continue;
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...walk(path, match));
    else if (match.test(entry.name)) out.push(path);
  }
  return out;
}

/** GitHub's anchor of a heading: lower case, punctuation dropped, each space a hyphen. */
function slug(heading: string): string {
  return heading
    .replace(/\[([^\]]*)\]\([^)]*\)/g, "$1") // a link counts by its text
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, "")
    .replace(/ /g, "-");
}

/** The text of a Markdown file outside its fenced code blocks, line by line (others blanked, so line numbers hold). */
function proseLines(text: string): string[] {
  let fence: string | undefined;
  return text.split("\n").map((line) => {
    const opens = /^\s*(```|~~~)/.exec(line);
    if (fence === undefined && opens) {
      fence = opens[1];
      return "";
    }
    if (fence !== undefined) {
      if (line.trim().startsWith(fence)) fence = undefined;
      return "";
    }
    return line;
  });
}

/** The anchors of a Markdown file's headings, repeats numbered as GitHub does (`-1`, `-2`). */
function anchorsOf(text: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const line of proseLines(text)) {
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!heading) continue;
    const base = slug(heading[1]!);
    const repeats = seen.get(base) ?? 0;
    seen.set(base, repeats + 1);
    anchors.add(repeats === 0 ? base : `${base}-${repeats}`);
  }
  return anchors;
}

const anchorCache = new Map<string, Set<string>>();
const anchorsOfFile = (file: string): Set<string> => {
  let anchors = anchorCache.get(file);
  if (!anchors) anchorCache.set(file, (anchors = anchorsOf(readFileSync(file, "utf8"))));
  return anchors;
};

/** What is wrong with `target` (a path, maybe with `#anchor`) resolved from `base`, or undefined. */
function brokenTarget(target: string, base: string, self: string): string | undefined {
  const [path, anchor] = target.split("#", 2) as [string, string | undefined];
  const file = path === "" ? self : resolve(base, decodeURIComponent(path));
  if (!file.startsWith(ROOT)) return "points outside the project";
  if (!existsSync(file)) return `no such file: ${relative(ROOT, file)}`;
  if (anchor !== undefined && anchor !== "") {
    if (!file.endsWith(".md")) return `an anchor into a file that is no Markdown: ${relative(ROOT, file)}`;
    if (!anchorsOfFile(file).has(anchor)) return `no heading "#${anchor}" in ${relative(ROOT, file)}`;
  }
  return undefined;
}

const URL_RE = /\b[a-z][a-z0-9+.-]*:\/\/[^\s)>"'`\]]+/gi;
/** A path-like name of a `.md` file, maybe with an anchor: `BENCHMARKS.md`, `docs/format.md#records`, `../README.md`. */
const MD_MENTION = /(?<![\w./-])((?:\.{1,2}\/)?[\w./-]*\w\.md)(#[\w-]+)?(?![\w])/g;

/** A named `.md` file: from the root, or from `dir` when it starts with `./` or `../`. */
function brokenMention(name: string, anchor: string | undefined, dir: string, self: string): string | undefined {
  const base = name.startsWith("./") || name.startsWith("../") ? dir : ROOT;
  return brokenTarget(`${name}${anchor ?? ""}`, base, self);
}

interface Broken {
  where: string;
  ref: string;
  why: string;
}

function checkMarkdown(path: string): Broken[] {
  const full = join(ROOT, path);
  const dir = dirname(full);
  const broken: Broken[] = [];
  proseLines(readFileSync(full, "utf8")).forEach((line, i) => {
    const where = `${path}:${i + 1}`;
    // Inline links and images: [text](target "title"), targets without a scheme are this project's files.
    for (const link of line.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
      const target = link[1]!;
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue;
      const why = brokenTarget(target, dir, full);
      if (why) broken.push({ where, ref: target, why });
    }
    // Reference definitions: [name]: target
    const definition = /^\s*\[[^\]]+\]:\s*<?(\S+?)>?(\s|$)/.exec(line);
    if (definition && !/^[a-z][a-z0-9+.-]*:/i.test(definition[1]!)) {
      const why = brokenTarget(definition[1]!, dir, full);
      if (why) broken.push({ where, ref: definition[1]!, why });
    }
    // Files named in the text, outside links.
    const prose = line.replace(/\]\([^)]*\)/g, "]").replace(URL_RE, " ");
    for (const [, name, anchor] of prose.matchAll(MD_MENTION)) {
      const why = brokenMention(name!, anchor, dir, full);
      if (why) broken.push({ where, ref: `${name}${anchor ?? ""}`, why });
    }
  });
  return broken;
}

function checkCode(path: string): Broken[] {
  const full = join(ROOT, path);
  const broken: Broken[] = [];
  readFileSync(full, "utf8")
    .split("\n")
    .forEach((line, i) => {
      for (const [, name, anchor] of line.replace(URL_RE, " ").matchAll(MD_MENTION)) {
        const why = brokenMention(name!, anchor, dirname(full), full);
        if (why) broken.push({ where: `${path}:${i + 1}`, ref: `${name}${anchor ?? ""}`, why });
      }
    });
  return broken;
}

const markdownFiles = ["README.md", "BENCHMARKS.md", "CHANGELOG.md", ...walk("docs", /\.md$/), ...walk("bench", /\.md$/), ...walk("test/fixtures", /\.md$/)];

describe("the project's references to its own files", () => {
  it("knows GitHub's heading anchors", () => {
    expect(slug("Writer: `openQueue(name, options)`")).toBe("writer-openqueuename-options");
    expect(slug("Nitro presets: Bun, Deno, Cloudflare Workers")).toBe("nitro-presets-bun-deno-cloudflare-workers");
    expect(slug("Files of v-queue's own")).toBe("files-of-v-queues-own");
    expect(slug("Where the crate 0.2.7 goes wrong")).toBe("where-the-crate-027-goes-wrong");
    expect(slug("Retention, the part index and seek by time")).toBe("retention-the-part-index-and-seek-by-time");
    expect(slug("Partitioned queues: `openPartitionedQueue`, `openPartitionedConsumer`, `openPartitionedSharedConsumer`")).toBe(
      "partitioned-queues-openpartitionedqueue-openpartitionedconsumer-openpartitionedsharedconsumer",
    );
    expect([...anchorsOf("# A\n## Setup\n```sh\n# not a heading\n```\n### Setup\n")]).toEqual(["a", "setup", "setup-1"]);
  });

  it("tells a broken reference from a good one", () => {
    const readme = join(ROOT, "README.md");
    expect(brokenTarget("docs/format.md#records", ROOT, readme)).toBeUndefined();
    expect(brokenTarget("#what-is-supported", ROOT, readme)).toBeUndefined();
    expect(brokenTarget("#no-such-heading", ROOT, readme)).toBe('no heading "#no-such-heading" in README.md');
    expect(brokenTarget("./docs/nothing.md", ROOT, readme)).toBe("no such file: docs/nothing.md");
    expect(brokenTarget("../../etc/passwd", ROOT, readme)).toBe("points outside the project");
    const mentions = [..."see FORMAT.md, and docs/format.md#v3-parts, not https://x.org/A.md".replace(URL_RE, " ").matchAll(MD_MENTION)].map((m) => m[0]);
    expect(mentions).toEqual(["FORMAT.md", "docs/format.md#v3-parts"]);
    expect(brokenMention("FORMAT.md", undefined, join(ROOT, "src"), readme)).toBe("no such file: FORMAT.md");
  });

  it("documents the on-disk format in docs/format.md", () => {
    expect(existsSync(join(ROOT, "docs/format.md"))).toBe(true);
  });

  it.each(markdownFiles)("%s: every relative link and named .md file resolves, anchors included", (path) => {
    expect(checkMarkdown(path)).toEqual([]);
  });

  it("code comments name .md files and anchors that exist", () => {
    const files = CODE_DIRS.flatMap((dir) => walk(dir, CODE_FILE));
    expect(files.length).toBeGreaterThan(100);
    expect(files.flatMap(checkCode)).toEqual([]);
  });
});
