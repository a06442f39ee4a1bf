import { existsSync } from "node:fs";
import { cp, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { join, resolve } from "pathe";
import ts from "typescript";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

/**
 * The built declarations as a project that installed v-queue sees them: through the package's
 * `exports`, fully checked (`skipLibCheck: false`), with no @types/node anywhere (a browser or
 * worker app). A Node type in `dist/*.d.mts` (a Buffer, a NodeJS.*, a symbol only @types/node
 * declares) fails here, where `npm run typecheck` (with @types/node) cannot see it.
 */
const ROOT = resolve(import.meta.dirname, "../..");

const CONSUMER = `
import { QueueWriter, type Message, type QueueDriver } from "v-queue";
import memoryDriver from "v-queue/drivers/memory";
import { createClient, type ClientMessage } from "v-queue/client";

interface Order { id: number; item: string }

export async function engine(driver: QueueDriver = memoryDriver()): Promise<Message[]> {
  const writer = await QueueWriter.open("orders", { driver });
  await writer.push({ id: 1, item: "book" });
  await writer[Symbol.asyncDispose]();
  return [];
}

export async function client(): Promise<number> {
  const vq = createClient({ baseURL: "http://127.0.0.1:9093" });
  await vq.produce("orders", [{ id: 1, item: "book" } satisfies Order, "text", new Uint8Array([1])]);
  // @ts-expect-error a Date is not a JSON value
  await vq.produce("orders", new Date());
  let total = 0;
  const { messages } = await vq.consume<Order>("orders", "billing", { json: true, maxMessages: 10 });
  for (const m of messages) {
    if (m.json) total += m.data.id;
    else if (m.type === "string") total += m.data.length + m.error.message.length;
    else total += m.data.byteLength;
  }
  for await (const m of vq.subscribe("orders", "audit")) {
    if (m.type === "string") total += m.data.length;
    else total += m.data.byteLength;
  }
  return total;
}

export type Plain = ClientMessage;
`;

/** Compiler options of the consumer project: a lib without Node, no automatic @types. */
const PROJECTS: Record<string, ts.CompilerOptions> = {
  "browser app (bundler, ES2022 + DOM)": {
    module: ts.ModuleKind.ESNext,
    moduleResolution: ts.ModuleResolutionKind.Bundler,
    lib: ["lib.es2022.d.ts", "lib.dom.d.ts", "lib.dom.iterable.d.ts", "lib.dom.asynciterable.d.ts"],
  },
  // ESNext declares Symbol.asyncDispose too: both declarations must merge.
  "worker (NodeNext, ESNext + WebWorker)": {
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    lib: ["lib.esnext.d.ts", "lib.webworker.d.ts", "lib.webworker.asynciterable.d.ts"],
  },
};

let dir: string;
beforeAll(async () => {
  if (!existsSync(join(ROOT, "dist/index.d.mts"))) throw new Error("Build first: npm run build (this test reads dist/*.d.mts).");
  await mkdir(join(ROOT, ".tmp"), { recursive: true });
  dir = await mkdtemp(join(ROOT, ".tmp/dist-types-"));
  // The package as installed: its package.json and declarations (third-party types resolve
  // from the project's node_modules, above).
  const pkg = join(dir, "node_modules/v-queue");
  await cp(join(ROOT, "dist"), join(pkg, "dist"), { recursive: true, filter: (src) => !src.endsWith(".mjs") || src.endsWith(".d.mts") });
  await cp(join(ROOT, "package.json"), join(pkg, "package.json"));
  await writeFile(join(dir, "package.json"), JSON.stringify({ name: "consumer", private: true, type: "module" }));
  await writeFile(join(dir, "index.ts"), CONSUMER);
});
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("the built declarations type-check in a project without @types/node", () => {
  for (const [name, project] of Object.entries(PROJECTS)) {
    it(
      name,
      () => {
        const options: ts.CompilerOptions = { ...project, target: ts.ScriptTarget.ES2022, strict: true, noEmit: true, skipLibCheck: false, types: [] };
        const host = ts.createCompilerHost(options);
        // @types/node is in the project's node_modules, above the consumer: hide it, so a
        // reference to it from our declarations fails as it would in a project without it.
        const hidden = (path: string) => /[\\/]node_modules[\\/]@types[\\/]node([\\/]|$)/.test(path);
        const { fileExists, directoryExists } = host;
        host.fileExists = (path) => !hidden(path) && fileExists.call(host, path);
        host.directoryExists = (path) => !hidden(path) && (directoryExists?.call(host, path) ?? true);
        const program = ts.createProgram([join(dir, "index.ts")], options, host);
        const diagnostics = ts.formatDiagnostics(ts.getPreEmitDiagnostics(program), host);
        expect(diagnostics).toBe("");
        const files = program.getSourceFiles().map((f) => f.fileName.slice(dir.length + 1));
        expect(files).toEqual(expect.arrayContaining(["node_modules/v-queue/dist/index.d.mts", "node_modules/v-queue/dist/client.d.mts"]));
      },
      60_000,
    );
  }
});
