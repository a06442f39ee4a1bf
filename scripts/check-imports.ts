/**
 * The import checks `npm run lint` runs after eslint (`node --import jiti/register
 * scripts/check-imports.ts [root]`): every relative import of the `.ts` files in the rooms
 * (`import`, `import type`, `export … from`, `import("…")` as a call or a type) is resolved to
 * its file, then
 * - no file reaches itself through its imports (a cycle): types two modules share live in a
 *   types module of their folder;
 * - each folder imports only from the folders FOLDER_IMPORTS lets it.
 * Prints each cycle as `a.ts -> b.ts -> a.ts` and each wrong-way import as
 * `a.ts -> b.ts: <why>`, and exits 1 when there is any.
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { join, relative, resolve } from "pathe";
import type * as TS from "typescript";
import { FOLDER_IMPORTS, ROOMS } from "./import-rules";

// Loaded by Node itself: through jiti, the compiler would be transpiled first (seconds).
const ts: typeof TS = createRequire(import.meta.url)("typescript");

/** Files, relative to the root (`src/queue.ts`), to the files they import. */
type ImportGraph = Map<string, Set<string>>;

function readImportGraph(root: string): ImportGraph {
  const graph: ImportGraph = new Map();
  for (const room of ROOMS) {
    for (const file of tsFiles(join(root, room))) {
      const imported = new Set<string>();
      for (const specifier of relativeSpecifiers(file)) {
        const target = resolveImport(resolve(file, "..", specifier));
        if (target) imported.add(relative(root, target));
      }
      graph.set(relative(root, file), imported);
    }
  }
  return graph;
}

function tsFiles(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { recursive: true, encoding: "utf8" })
    .filter((name) => name.endsWith(".ts"))
    .map((name) => join(dir, name))
    .sort();
}

/** The `./` and `../` module names a file imports, in every form (TypeScript's scanner: comments and strings are skipped). */
function relativeSpecifiers(file: string): string[] {
  const { importedFiles } = ts.preProcessFile(readFileSync(file, "utf8"), true, true);
  return importedFiles.map(({ fileName }) => fileName).filter((name) => name.startsWith("."));
}

/** The file an import names, as the bundler resolves it (with or without `.ts`, or a folder's index). */
function resolveImport(path: string): string | undefined {
  const candidates = [path, `${path}.ts`, `${path}.d.ts`, join(path, "index.ts")];
  return candidates.find((candidate) => existsSync(candidate) && statSync(candidate).isFile());
}

/**
 * The import cycles: for each set of files that reach each other, cycles through every import
 * among them (each the shortest closing that import), each starting at its first file by name.
 */
function findCycles(graph: ImportGraph): string[][][] {
  return stronglyConnected(graph).map((group) => {
    const members = new Set(group);
    const covered = new Set<string>();
    const cycles: string[][] = [];
    for (const from of group) {
      for (const to of [...(graph.get(from) ?? [])].sort()) {
        if (!members.has(to) || covered.has(`${from} ${to}`)) continue;
        const cycle = [from, ...shortestPath(graph, members, to, from)];
        for (let i = 0; i + 1 < cycle.length; i++) covered.add(`${cycle[i]} ${cycle[i + 1]}`);
        cycles.push(startAtFirst(cycle));
      }
    }
    return cycles;
  });
}

/** Tarjan's strongly connected components with more than one file (or a file importing itself), each sorted. */
function stronglyConnected(graph: ImportGraph): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const groups: string[][] = [];
  const visit = (file: string): void => {
    index.set(file, index.size);
    low.set(file, index.get(file)!);
    stack.push(file);
    onStack.add(file);
    for (const next of graph.get(file) ?? []) {
      if (!index.has(next)) {
        visit(next);
        low.set(file, Math.min(low.get(file)!, low.get(next)!));
      } else if (onStack.has(next)) low.set(file, Math.min(low.get(file)!, index.get(next)!));
    }
    if (low.get(file) !== index.get(file)) return;
    const group: string[] = [];
    let member: string;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      group.push(member);
    } while (member !== file);
    if (group.length > 1 || graph.get(file)?.has(file)) groups.push(group.sort());
  };
  for (const file of [...graph.keys()].sort()) if (!index.has(file)) visit(file);
  return groups.sort((a, b) => a[0]!.localeCompare(b[0]!));
}

/** The files from `from` to `to` (both included), by breadth, within `members`. */
function shortestPath(graph: ImportGraph, members: Set<string>, from: string, to: string): string[] {
  const previous = new Map<string, string | null>([[from, null]]);
  const queue = [from];
  for (let at = queue.shift(); at !== undefined && at !== to; at = queue.shift()) {
    for (const next of [...(graph.get(at) ?? [])].sort()) {
      if (members.has(next) && !previous.has(next)) {
        previous.set(next, at);
        queue.push(next);
      }
    }
  }
  const path: string[] = [];
  for (let at: string | null | undefined = to; at != null; at = previous.get(at)) path.unshift(at);
  return path;
}

/** `[b, c, a, b]` as `[a, b, c, a]`: the same cycle, from its first file by name. */
function startAtFirst(cycle: string[]): string[] {
  const ring = cycle.slice(0, -1);
  const first = ring.indexOf([...ring].sort()[0]!);
  const turned = [...ring.slice(first), ...ring.slice(0, first)];
  return [...turned, turned[0]!];
}

/** The imports from one folder into another that FOLDER_IMPORTS does not allow, with why. */
function findWrongWays(graph: ImportGraph): string[] {
  const wrong: string[] = [];
  for (const [file, imported] of graph) {
    const from = folderOf(file);
    const rule = FOLDER_IMPORTS[from];
    if (!rule) continue;
    for (const target of [...imported].sort()) {
      const to = folderOf(target);
      // A top-level room in `may` lets in all of it from outside (runtime/ may import src/core/); within a room, rows name folders.
      const top = to.split("/")[0]!;
      if (to === from || rule.may.includes(to) || (rule.may.includes(top) && from.split("/")[0] !== top)) continue;
      const allowed = [from, ...rule.may].map((folder) => (folder.includes(".") ? folder : `${folder}/`)).join(", ");
      wrong.push(`${file} -> ${target}: ${from}/ imports only from ${allowed} (${rule.why})`);
    }
  }
  return wrong.sort();
}

/** The longest folder of FOLDER_IMPORTS holding a file, else its top-level folder (or the file itself, at the root). */
function folderOf(file: string): string {
  const holders = Object.keys(FOLDER_IMPORTS).filter((folder) => file.startsWith(`${folder}/`));
  return holders.sort((a, b) => b.length - a.length)[0] ?? file.split("/")[0]!;
}

/** Every cycle, each a line. */
function reportCycles(graph: ImportGraph): string[] {
  return findCycles(graph).flatMap((group) => group.map((cycle) => cycle.join(" -> ")));
}

const root = resolve(process.argv[2] ?? join(import.meta.dirname, ".."));
const graph = readImportGraph(root);
const cycles = reportCycles(graph);
const wrongWays = findWrongWays(graph);
for (const cycle of cycles) console.log(`import cycle: ${cycle}`);
for (const wrong of wrongWays) console.log(`wrong-way import: ${wrong}`);
if (cycles.length > 0)
  console.log(
    `${cycles.length} import ${cycles.length === 1 ? "cycle" : "cycles"}: move what both sides use (types most often) into a module of their folder that imports neither, e.g. its types.ts.`,
  );
if (wrongWays.length > 0)
  console.log(
    `${wrongWays.length} wrong-way ${wrongWays.length === 1 ? "import" : "imports"}: the folders' directions are in scripts/import-rules.ts (FOLDER_IMPORTS).`,
  );
if (cycles.length + wrongWays.length > 0) process.exitCode = 1;
