/**
 * `npm run bench [-- engine|http|unstorage ...]`: runs the selected benchmarks (all by
 * default) one after the other. The HTTP and unstorage benches live in their own files,
 * added separately; they run only when present, so this entry never breaks on their absence.
 */
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { runEngineBench } from "./engine";

interface Suite {
  name: string;
  run: () => Promise<unknown>;
}

/** A bench in `bench/<file>.ts` exporting `exportName`, loaded only if the file exists. */
function optional(name: string, file: string, exportName: string): Suite | undefined {
  const url = new URL(`./${file}`, import.meta.url);
  if (!existsSync(fileURLToPath(url))) return undefined;
  return {
    name,
    run: async () => {
      const mod = (await import(url.href)) as Record<string, unknown>;
      const run = mod[exportName];
      if (typeof run !== "function") throw new Error(`bench/${file} does not export ${exportName}()`);
      return (run as () => Promise<unknown>)();
    },
  };
}

const suites = [
  { name: "engine", run: runEngineBench },
  optional("http", "http.ts", "runHttpBench"),
  optional("unstorage", "unstorage.ts", "runUnstorageBench"),
  optional("client", "client.ts", "runClientBench"),
  optional("totals", "totals.ts", "runTotalsBench"),
  optional("compression", "compression.ts", "runCompressionBench"),
  optional("life", "life.ts", "runLifeBench"),
  optional("shared", "shared.ts", "runSharedBench"),
  optional("dashboard", "dashboard.ts", "runDashboardBench"),
  optional("instances", "instances.ts", "runInstancesBench"),
  optional("runtimes", "runtimes.ts", "runRuntimesBench"),
].filter((s): s is Suite => s !== undefined);

const wanted = process.argv.slice(2).filter((arg) => !arg.startsWith("-"));
const unknown = wanted.filter((name) => !suites.some((s) => s.name === name));
if (unknown.length > 0) {
  console.error(`Unknown bench ${unknown.join(", ")}; available: ${suites.map((s) => s.name).join(", ")}`);
  process.exit(2);
}

console.log(`v-queue benchmarks - Node ${process.version}, ${new Date().toISOString()}`);
for (const suite of suites) {
  if (wanted.length > 0 && !wanted.includes(suite.name)) continue;
  const start = performance.now();
  await suite.run();
  console.error(`  (${suite.name} bench took ${((performance.now() - start) / 1000).toFixed(0)} s)`);
}
