import { execFile, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { join, resolve } from "pathe";
import { promisify } from "node:util";
import { beforeAll, describe, expect, it } from "vitest";
import { packedTarball } from "../helpers/pack";
import { useTempDirs } from "../helpers/tmp";

/**
 * The package as a user gets it: `npm pack` of the built project, installed from the tarball
 * into an empty folder (its dependencies from the npm registry or npm's cache), then used
 * from there, with nothing of this checkout in reach: the library from a Node script, the
 * `v-queue` bin through npx, and `v-queue serve` over HTTP.
 *
 * Needs `npm run build` first (as the README's quick start does); it builds once itself when
 * dist/ is missing. It does not rebuild an existing dist/: other suites may be reading it. The
 * tarball is the one the scratch apps install (test/helpers/pack.ts).
 */

const root = resolve(import.meta.dirname, "../..");
const run = promisify(execFile);
const tempDir = useTempDirs("vq-package-");
const TIMEOUT = 240_000;

let app: string;
let packed: { files: { path: string }[] };

beforeAll(async () => {
  if (!existsSync(join(root, "dist", "cli.mjs"))) await run("npm", ["run", "build"], { cwd: root, timeout: 180_000 });
  const work = await tempDir();
  const tarball = await packedTarball();
  const { stdout } = await run("tar", ["-tzf", tarball], { maxBuffer: 64 << 20 });
  packed = {
    files: stdout
      .split("\n")
      .filter(Boolean)
      .map((path) => ({ path: path.replace(/^package\//, "") })),
  };
  app = join(work, "app");
  await mkdir(app);
  await writeFile(join(app, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }));
  await run("npm", ["install", tarball, "--prefer-offline", "--no-audit", "--no-fund"], { cwd: app, timeout: 180_000 });
}, TIMEOUT);

describe("the packed package, installed from its tarball into an empty folder", () => {
  it("ships the bin and every entry of `exports`, and no sources or tests", async () => {
    const files = packed.files.map((f) => f.path);
    const pkg = JSON.parse(await readFile(join(root, "package.json"), "utf8")) as {
      bin: Record<string, string>;
      exports: Record<string, Record<string, string> | string>;
    };
    const wanted = [...Object.values(pkg.bin), ...Object.values(pkg.exports).flatMap((entry) => (typeof entry === "string" ? [entry] : Object.values(entry)))];
    for (const file of wanted) expect(files, file).toContain(file.replace(/^\.\//, ""));
    expect(files).toContain("dist/cli.mjs");
    expect(files.filter((f) => /^(src|test|adapters|runtime|client|bench|playground)\//.test(f))).toEqual([]);
  });

  it("installs nothing native: zstd-napi is an optional peer, not a dependency, and is not installed", async () => {
    const manifest = JSON.parse(await readFile(join(app, "node_modules", "v-queue", "package.json"), "utf8")) as Record<
      string,
      Record<string, unknown> | undefined
    >;
    for (const field of ["dependencies", "optionalDependencies"]) expect(Object.keys(manifest[field] ?? {}), field).not.toContain("zstd-napi");
    expect(manifest.peerDependencies).toHaveProperty("zstd-napi");
    expect(manifest.peerDependenciesMeta).toMatchObject({ "zstd-napi": { optional: true } });
    expect(existsSync(join(app, "node_modules", "zstd-napi"))).toBe(false);
  });

  it("depends on nothing only the CLI uses (no listhen, c12 or citty): each dependency is imported by an entry of `exports`; one h3", async () => {
    const installed = join(app, "node_modules", "v-queue");
    const manifest = JSON.parse(await readFile(join(installed, "package.json"), "utf8")) as {
      dependencies?: Record<string, string>;
      peerDependenciesMeta?: Record<string, unknown>;
    };
    const dependencies = Object.keys(manifest.dependencies ?? {});
    // What the library's files import (all of dist/ but the CLI's own file), by package name.
    const imported = new Set<string>();
    const files = (await readdir(join(installed, "dist"), { recursive: true, encoding: "utf8" })).filter((f) => f.endsWith(".mjs") && f !== "cli.mjs");
    for (const file of files) {
      const code = await readFile(join(installed, "dist", file), "utf8");
      for (const [, specifier] of code.matchAll(/(?:\bfrom\s*|\bimport\s*\(\s*)["']([^"'./][^"']*)["']/g))
        imported.add(/^(@[^/]+\/)?[^/]+/.exec(specifier!)![0]);
    }
    expect(dependencies.filter((name) => !imported.has(name))).toEqual([]);
    for (const cliOnly of ["listhen", "c12", "citty"]) {
      expect(dependencies).not.toContain(cliOnly);
      expect(existsSync(join(app, "node_modules", cliOnly)), cliOnly).toBe(false);
    }
    expect(manifest.peerDependenciesMeta).toMatchObject({ c12: { optional: true } });
    const tree = JSON.parse(await readFile(join(app, "node_modules", ".package-lock.json"), "utf8")) as { packages: Record<string, { version: string }> };
    const h3 = Object.entries(tree.packages).filter(([path]) => /(^|\/)node_modules\/h3$/.test(path));
    expect(h3.map(([, entry]) => entry.version)).toEqual([expect.stringMatching(/^2\./)]);
  });

  it(
    "without c12 (an optional peer), a config file stops `v-queue serve` at start, naming the package to install",
    async () => {
      const cwd = join(app, "configured");
      await mkdir(cwd, { recursive: true });
      await writeFile(join(cwd, "vqueue.config.json"), JSON.stringify({ port: "nine" }));
      const failed = await run(process.execPath, [join(app, "node_modules", ".bin", "v-queue"), "serve", "--port", "0"], { cwd, timeout: 60_000 }).then(
        () => undefined,
        (error: { code: number; stdout: string; stderr: string }) => error,
      );
      expect(failed?.code).toBe(1);
      const output = `${failed?.stdout}${failed?.stderr}`;
      expect(output).toContain("Reading the config file vqueue.config.json needs the npm package c12, which is not installed");
      expect(output).toContain("`npm install c12`");
      expect(output).not.toMatch(/^\s+at /m);
    },
    TIMEOUT,
  );

  it(
    "`v-queue serve --zstd native` without zstd-napi stops at start, naming the package to install",
    async () => {
      const failed = await run(
        process.execPath,
        [join(app, "node_modules", ".bin", "v-queue"), "serve", "--dir", "native", "--port", "0", "--zstd", "native"],
        { cwd: app, timeout: 60_000 },
      ).then(
        () => undefined,
        (error: { code: number; stdout: string; stderr: string }) => error,
      );
      expect(failed?.code).toBe(1);
      const output = `${failed?.stdout}${failed?.stderr}`;
      expect(output).toContain("needs the npm package zstd-napi, which is not installed");
      expect(output).toContain("`npm install zstd-napi`");
      expect(output).not.toMatch(/^\s+at /m);
    },
    TIMEOUT,
  );

  it(
    "imports every entry and pushes and reads a message with the library",
    async () => {
      const pkg = JSON.parse(await readFile(join(root, "package.json"), "utf8")) as { exports: Record<string, unknown> };
      const entries = Object.keys(pkg.exports)
        // v-queue/cloudflare imports workerd's own `cloudflare:workers`: it loads only there (test/workerd bundles it).
        .filter((key) => key !== "./package.json" && key !== "./cloudflare")
        .map((key) => `v-queue${key.slice(1)}`);
      const data = join(app, "queues");
      const script = `
        import { openQueue, openConsumer, inspectQueue } from "v-queue";
        import fsDriver from "v-queue/drivers/fs";
        for (const entry of ${JSON.stringify(entries)}) await import(entry);
        const dir = ${JSON.stringify(data)};
        const queue = await openQueue("orders", { dir });
        const landed = await queue.push({ id: 1, item: "book" });
        const consumer = await openConsumer("orders", "billing", { dir });
        const [message] = await consumer.read();
        await consumer.commit();
        await consumer.close();
        await queue.close();
        const stats = await inspectQueue(fsDriver({ dir }), "orders");
        // Compression loads zstd (the zstd-codec dependency) on first use, from the installed package.
        const logs = await openQueue("logs", { dir, compression: "zstd", compressionSampleBytes: 1024 });
        const lines = Array.from({ length: 60 }, (_, i) => JSON.stringify({ i, level: "info", msg: "request completed for user " + (i % 7) }));
        await logs.pushBatch(lines);
        await logs.close();
        const reader = await openConsumer("logs", "c", { dir });
        const back = await reader.read({ max: 100 });
        await reader.close();
        const compressed = back.filter((m) => m.stored !== undefined).length;
        const same = back.map((m) => m.data).join() === lines.join();
        console.log(JSON.stringify({ landed, data: message.data, type: message.type, messages: stats.messages, same, compressed: compressed > 20 }));
      `;
      await writeFile(join(app, "use.mjs"), script);
      const { stdout, stderr } = await run(process.execPath, ["use.mjs"], { cwd: app, timeout: 60_000 });
      // The WebAssembly zstd, without a word about the native one nobody asked for.
      expect(stderr).not.toContain("zstd");
      expect(JSON.parse(stdout)).toEqual({
        landed: { part: 0, offset: 0, seq: 1 },
        data: '{"id":1,"item":"book"}',
        type: "string",
        messages: 1,
        same: true,
        compressed: true,
      });
      expect(existsSync(join(data, "orders-0", "orders_queue"))).toBe(true);
    },
    TIMEOUT,
  );

  it(
    "runs the bin: `npx v-queue --version`, and `v-queue serve` (settings from .env, no c12) produces and consumes over HTTP",
    async () => {
      const version = (JSON.parse(await readFile(join(root, "package.json"), "utf8")) as { version: string }).version;
      const { stdout } = await run("npx", ["--no-install", "v-queue", "--version"], { cwd: app, timeout: 60_000 });
      expect(stdout.trim()).toBe(version);

      // Read without c12, before the VQUEUE_* variables are.
      await writeFile(join(app, ".env"), "VQUEUE_DURABILITY=none\n");
      const server = spawn(process.execPath, [join(app, "node_modules", ".bin", "v-queue"), "serve", "--dir", "served", "--port", "0", "--no-auth"], {
        cwd: app,
        stdio: ["ignore", "pipe", "pipe"],
      });
      const exited = new Promise<number | null>((done) => server.on("exit", (code) => done(code)));
      try {
        let output = "";
        const url = await new Promise<string>((done, fail) => {
          const timer = setTimeout(() => fail(new Error(`no URL printed in 60 s: ${output}`)), 60_000);
          const onData = (chunk: Buffer) => {
            output += chunk.toString("utf8");
            const found = /on (http:\/\/127\.0\.0\.1:\d+)/.exec(output);
            if (found) {
              clearTimeout(timer);
              done(found[1]!);
            }
          };
          server.stdout!.on("data", onData);
          server.stderr!.on("data", onData);
          void exited.then((code) => fail(new Error(`v-queue serve exited (${code}): ${output}`)));
        });
        expect(output).toContain("(durability none, auth off)");
        expect(await (await fetch(`${url}/health`)).json()).toMatchObject({ status: "ok", version });
        const produced = await fetch(`${url}/api/v1/queues/orders/messages`, { method: "POST", body: "hello", headers: { "content-type": "text/plain" } });
        expect(produced.status).toBe(201);
        const consumed = await fetch(`${url}/api/v1/queues/orders/consumers/billing/messages?max_messages=10&timeout_ms=5000`);
        expect(await consumed.json()).toMatchObject({ count: 1, messages: [{ type: "string", data: "hello" }] });
        expect((await fetch(`${url}/api/v1/queues/orders/consumers/billing/commit`, { method: "POST" })).ok).toBe(true);
        expect(existsSync(join(app, "served", "orders-0", "orders_queue"))).toBe(true);
        server.kill("SIGTERM");
        expect(await exited).toBe(0);
      } finally {
        await rm(join(app, ".env"), { force: true });
        if (server.exitCode === null && server.signalCode === null) {
          server.kill("SIGKILL");
          await exited;
        }
      }
    },
    TIMEOUT,
  );
});
