// Over 300 lines: compression end to end (v3 parts, dictionaries, the crate's reader) with shared fixtures.
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { readFile, writeFile } from "node:fs/promises";
import { crc32 } from "node:zlib";
import { join } from "pathe";
import { describe, expect, it, vi } from "vitest";
import fsDriver from "../../adapters/drivers/fs";
import { QueueConsumer } from "../../src/consumers/ordered/consumer";
import type { QueueProblem } from "../../src/core/errors";
import type { Message } from "../../src/format/message";
import { QueueWriter } from "../../src/writer/writer";
import { startChild } from "../helpers/spawn";
import { useTempDirs } from "../helpers/tmp";
import { ZSTD_IMPLS, zstdImpl } from "../helpers/zstd";
import { autoZstd, nativeZstd, selectZstd, ZstdNativeError, type NapiBinding } from "../../adapters/zstd-native";
import { openConsumer, openQueue } from "../../adapters/node";
import { loadZstd } from "../../src/compression/zstd";
import { createRequire } from "node:module";
import { sleep } from "../helpers/sleep";

/** Writing with `compression: "zstd"`, checked against docs/format.md's rules on the files themselves. */

const tempDir = useTempDirs("vq-zstd-");
const ZSTD_CLI = "/usr/bin/zstd";
const FIXTURES = join(import.meta.dirname, "../fixtures", "v3");
/** Where CI runs (.ci/run installs the zstd CLI), its tests must run, not skip. */
const skipCli = !existsSync(ZSTD_CLI) && !process.env.CI;
const lines = Array.from({ length: 600 }, (_, i) =>
  JSON.stringify({
    ts: new Date(1_764_748_800_000 + i * 17).toISOString(),
    level: ["info", "debug", "warn"][i % 3],
    service: ["checkout", "search", "auth"][i % 3],
    request_id: `${(i * 2654435761) % 4294967296}`.padStart(10, "0"),
    msg: `handled request ${i} in ${(i * 37) % 900} ms`,
    http: { method: i % 4 ? "GET" : "POST", status: i % 11 ? 200 : 503 },
  }),
);

interface Parsed {
  offset: number;
  length: number;
  magic: string;
  seq: number;
  type: number;
  crcOk: boolean;
  body: Buffer;
}

/** The records of a part file, read by docs/format.md's rules alone. */
function parse(bytes: Buffer): Parsed[] {
  const out: Parsed[] = [];
  for (let at = 0; at < bytes.length;) {
    const length = bytes.readUInt32LE(at + 8);
    const header = Buffer.from(bytes.subarray(at, at + 25));
    header.writeUInt32LE(0, 21);
    const body = bytes.subarray(at + 25, at + 25 + length);
    out.push({
      offset: Number(bytes.readBigUInt64LE(at)),
      length,
      magic: bytes.subarray(at + 12, at + 16).toString("hex"),
      seq: bytes.readUInt32LE(at + 16),
      type: bytes[at + 20]!,
      crcOk: crc32(body, crc32(header)) === bytes.readUInt32LE(at + 21),
      body,
    });
    at += 25 + length;
  }
  return out;
}

async function writeQueue(dir: string, options: Parameters<typeof QueueWriter.open>[1] = {}): Promise<void> {
  const writer = await QueueWriter.open("q", { driver: fsDriver({ dir }), durability: "none", ...options });
  for (let i = 0; i < lines.length; i += 60) await writer.pushBatch(lines.slice(i, i + 60));
  await writer.push("short");
  await writer.close();
}

for (const { name, zstd, skip } of ZSTD_IMPLS)
  describe.skipIf(skip)(`compression: "zstd", zstd ${name}`, () => {
    it("writes v3 records by the rules: raw while learning, then the 0x80 flag, a u32 length and a zstd frame, crcs over the stored bytes", async () => {
      const dir = await tempDir();
      await writeQueue(dir, { zstd, compression: "zstd", compressionSampleBytes: 16 * 1024 });
      const records = parse(await readFile(join(dir, "q-0", "q_queue")));
      expect(records).toHaveLength(lines.length + 1);
      expect(records.every((r, i) => r.magic === "33feefee" && r.crcOk && r.seq === i + 1)).toBe(true);
      const flagged = records.filter((r) => r.type === 0xd3);
      const raw = records.filter((r) => r.type === 0x53);
      // The first ~16 KiB (60 lines a batch: the dictionary is made before the batch after it) stay raw.
      expect(raw.slice(0, 60).map((r) => r.body.toString())).toEqual(lines.slice(0, 60));
      expect(flagged.length).toBeGreaterThan(400);
      for (const r of flagged) {
        expect(lines[r.seq - 1]!.length).toBe(r.body.readUInt32LE(0));
        expect(r.body.subarray(4, 8).toString("hex")).toBe("28b52ffd"); // zstd frame magic
      }
      expect(records.at(-1)).toMatchObject({ type: 0x53, body: Buffer.from("short") }); // under 24 bytes: raw
      const dict = await readFile(join(dir, "q-0", "q_dict"));
      expect(dict.length).toBeLessThanOrEqual(16 * 1024);
      // Raw content built from the sampled lines (no ZDICT in the npm zstd): pieces of them, not the trained magic.
      expect(dict.subarray(0, 4).toString("hex")).not.toBe("37a430ec");
      expect(dict.length).toBeGreaterThan(1024);
      const sampled = lines.slice(0, 60).join("");
      expect(sampled.includes(dict.subarray(-64).toString())).toBe(true);
      // The push info line keeps the v2 form, with a correct crc (docs/logs.md#compression).
      const info = (await readFile(join(dir, "q-0", "q_info_push"), "utf8")).split("\n")[0]!;
      const prefix = `q;${records.reduce((n, r) => n + 25 + r.length, 0)};${records.length};`;
      expect(info).toBe(`${prefix}${crc32(prefix)}`);

      const consumer = await QueueConsumer.open("q", "c", { driver: fsDriver({ dir }), zstd });
      const got: Message[] = [];
      for (let batch = await consumer.read({ max: 1000 }); batch.length > 0; batch = await consumer.read({ max: 1000 })) got.push(...batch);
      await consumer.close();
      expect(got.map((m) => m.data)).toEqual([...lines, "short"]);
    });

    it.skipIf(skipCli)("writes frames that the zstd CLI decompresses with the part's Q_dict", async () => {
      const dir = await tempDir();
      await writeQueue(dir, { zstd, compression: "zstd", compressionSampleBytes: 8 * 1024 });
      const records = parse(await readFile(join(dir, "q-0", "q_queue"))).filter((r) => r.type === 0xd3);
      for (const r of [records[0]!, records.at(-1)!]) {
        const frame = join(dir, `frame-${r.seq}.zst`);
        await writeFile(frame, r.body.subarray(4));
        const out = execFileSync(ZSTD_CLI, ["-d", "-c", "-D", join(dir, "q-0", "q_dict"), frame]);
        expect(out.toString()).toBe(lines[r.seq - 1]);
      }
    });

    it("is off by default: parts stay v2, byte for byte as records built by the rules", async () => {
      const dir = await tempDir();
      await writeQueue(dir);
      const bytes = await readFile(join(dir, "q-0", "q_queue"));
      const records = parse(bytes);
      expect(records.every((r) => r.magic === "eefeefee" && r.type === 0x53 && r.crcOk)).toBe(true);
      expect(records.map((r) => r.body.toString())).toEqual([...lines, "short"]);
      expect(bytes.length).toBe([...lines, "short"].reduce((n, l) => n + 25 + l.length, 0));
      expect(existsSync(join(dir, "q-0", "q_dict"))).toBe(false);
    });

    it("starts a new part rather than put compressed records after v2 ones (and v2 ones after v3)", async () => {
      const dir = await tempDir();
      await writeQueue(dir);
      await writeQueue(dir, { zstd, compression: "zstd", rollOnOpen: false });
      await writeQueue(dir, { rollOnOpen: false });
      const magics = async (part: number) => new Set(parse(await readFile(join(dir, `q-${part}`, "q_queue"))).map((r) => r.magic));
      expect([await magics(0), await magics(1), await magics(2)]).toEqual([new Set(["eefeefee"]), new Set(["33feefee"]), new Set(["eefeefee"])]);
    });

    it.skipIf(skipCli)(
      "with compressionDictionary: every part gets that dictionary as its Q_dict, bodies compressed from the first, the CLI reads them",
      async () => {
        const dir = await tempDir();
        const trained = await readFile(join(FIXTURES, "dict.trained"));
        await writeQueue(dir, { zstd, compression: "zstd", compressionDictionary: trained, maxPartBytes: 8 * 1024 });
        const parts = ["q-0", "q-1"];
        for (const part of parts) {
          expect(await readFile(join(dir, part, "q_dict"))).toEqual(trained);
          const records = parse(await readFile(join(dir, part, "q_queue")));
          expect(records[0]!.type).toBe(0xd3); // nothing learnt first
          const r = records[0]!;
          const frame = join(dir, `frame-${part}.zst`);
          await writeFile(frame, r.body.subarray(4));
          expect(execFileSync(ZSTD_CLI, ["-d", "-c", "-D", join(dir, part, "q_dict"), frame]).toString()).toBe(
            lines[r.seq - 1 + (part === "q-0" ? 0 : parse(await readFile(join(dir, "q-0", "q_queue"))).length)],
          );
        }
        const consumer = await QueueConsumer.open("q", "c", { driver: fsDriver({ dir }), zstd });
        const got: Message[] = [];
        for (let batch = await consumer.read({ max: 1000 }); batch.length > 0; batch = await consumer.read({ max: 1000 })) got.push(...batch);
        await consumer.close();
        expect(got.map((m) => m.data)).toEqual([...lines, "short"]);
      },
    );

    it("a storage error while reading a part's dictionary fails the read, to be retried: no record is skipped as if there were none", async () => {
      const dir = await tempDir();
      const driver = fsDriver({ dir });
      const q = await QueueWriter.open("q", {
        driver,
        durability: "none",
        compression: "zstd",
        compressionDictionary: new TextEncoder().encode(lines.slice(0, 20).join("")),
      });
      await q.pushBatch(lines.slice(0, 50));
      await q.close();
      let failures = 1;
      const flaky = {
        ...driver,
        readRecord: (path: string) =>
          path.endsWith("_dict") && failures-- > 0
            ? Promise.reject(Object.assign(new Error("EMFILE: too many open files"), { code: "E_IO" }))
            : driver.readRecord(path),
      };
      const problems: QueueProblem[] = [];
      const c = await QueueConsumer.open("q", "c", { driver: flaky, onProblem: (p) => problems.push(p) });
      await expect(c.read({ max: 100 })).rejects.toThrow("EMFILE");
      expect((await c.read({ max: 100 })).map((m) => m.data)).toEqual(lines.slice(0, 50));
      expect(problems).toEqual([]);
      await c.close();
    });

    it("checks its options", async () => {
      const dir = await tempDir();
      const open = (compressionDictionary: unknown) =>
        QueueWriter.open("q", { driver: fsDriver({ dir }), compression: "zstd", compressionDictionary: compressionDictionary as Uint8Array });
      await expect(open("./logs.dict")).rejects.toMatchObject({
        code: "E_OPTION",
        message: expect.stringContaining("compressionDictionary: use a Uint8Array"),
      });
      await expect(open(new Uint8Array(7).fill(65))).rejects.toMatchObject({ code: "E_OPTION", message: expect.stringContaining("at least 8 bytes") });
      await expect(open(Uint8Array.of(0x37, 0xa4, 0x30, 0xec, 1, 2, 3, 4))).rejects.toMatchObject({
        code: "E_OPTION",
        message: expect.stringContaining("truncated"),
      });
      await expect(open(new Uint8Array(1024 * 1024 + 1).fill(65))).rejects.toMatchObject({
        code: "E_OPTION",
        message: expect.stringContaining("at most 1048576"),
      });
      await (await open(new Uint8Array(8).fill(65))).close();
      // A dictionary without compression would be silently unused: refused.
      await expect(QueueWriter.open("q", { driver: fsDriver({ dir }), compressionDictionary: new Uint8Array(64).fill(65) })).rejects.toMatchObject({
        code: "E_OPTION",
        message: expect.stringContaining('only with compression: "zstd"'),
      });
      await expect(QueueWriter.open("q", { driver: fsDriver({ dir }), compression: "gzip" as "zstd" })).rejects.toMatchObject({
        code: "E_OPTION",
        message: expect.stringContaining("compression"),
      });
      await expect(QueueWriter.open("q", { driver: fsDriver({ dir }), compressionLevel: 0 })).rejects.toMatchObject({ code: "E_OPTION" });
      await expect(QueueWriter.open("q", { driver: fsDriver({ dir }), zstd: "native" as unknown as typeof zstd })).rejects.toMatchObject({
        code: "E_OPTION",
        message: expect.stringContaining("Invalid zstd: use a function"),
      });
    });

    it("a writer killed with SIGKILL mid-write leaves a readable queue: every acknowledged message, never a bad one", async () => {
      const dir = await tempDir();
      const acked: Set<number>[] = [];
      const problems: QueueProblem[] = [];
      for (let run = 0; run < 4; run++) {
        const child = startChild("pusher", dir, String(run), "4", String(64 * 1024), "zstd", name);
        await child.waitFor((line) => line.startsWith("ack"));
        await sleep(100 + Math.random() * 300);
        child.process.kill("SIGKILL");
        await child.exited;
        acked.push(new Set(child.lines.filter((l) => l.startsWith("ack ")).map((l) => Number(l.slice(4)))));
      }
      const reader = await QueueConsumer.open("crash", "check", { driver: fsDriver({ dir }), onProblem: (p) => problems.push(p), zstd });
      const seen = acked.map(() => new Set<number>());
      for (let batch = await reader.read({ max: 5000 }); batch.length > 0; batch = await reader.read({ max: 5000 })) {
        for (const m of batch) {
          const [run, i, xs] = (m.data as string).split("-") as [string, string, string];
          expect(xs).toBe("x".repeat(Number(i) % 200));
          seen[Number(run)]!.add(Number(i));
        }
      }
      await reader.close();
      acked.forEach((set, run) =>
        expect(
          [...set].filter((i) => !seen[run]!.has(i)),
          `run ${run}`,
        ).toEqual([]),
      );
      expect(problems.filter((p) => p.code === "BAD_COMPRESSED" || p.code === "NO_DICTIONARY")).toEqual([]);
    }, 60_000);
  });

describe.skipIf(zstdImpl("native").skip)("the two zstd implementations (wasm: zstd-codec, native: zstd-napi)", () => {
  const dict = Buffer.from(lines.slice(0, 40).join("\n"));

  // Not byte for byte the same frames (zstd-napi bundles zstd 1.5.7, zstd-codec an older one), but the same format.
  it("each reads the other's frames, of about the same size", async () => {
    const [wasm, native] = [await loadZstd(), await nativeZstd()];
    for (const level of [1, 3, 9]) {
      const [cw, cn] = [wasm.compressor(dict, level), native.compressor(dict, level)];
      const [dw, dn] = [wasm.decompressor(dict), native.decompressor(dict)];
      for (const line of [lines[100]!, lines[599]!, "x".repeat(5000)]) {
        const body = Buffer.from(line);
        const [fw, fn] = [cw.compress(body), cn.compress(body)];
        expect(Buffer.from(fn.subarray(0, 4)).toString("hex")).toBe("28b52ffd");
        expect(fn.length).toBeLessThan(fw.length * 1.15 + 8);
        expect(fw.length).toBeLessThan(fn.length * 1.15 + 8);
        expect(Buffer.from(dn.decompress(fw, body.length)!).toString()).toBe(line);
        expect(Buffer.from(dw.decompress(fn, body.length)!).toString()).toBe(line);
        expect(dn.decompress(fw, body.length + 1)).toBeUndefined(); // another announced size
      }
      for (const x of [cw, cn, dw, dn]) x.free();
    }
  });

  it("the native one is used when selected, not a silent fall-back: its binding compresses and decompresses the bodies", async () => {
    const real = createRequire(import.meta.url)("zstd-napi/binding") as NapiBinding;
    const calls = { compress: 0, decompress: 0 };
    const counting: NapiBinding = {
      ...real,
      compressBound: (n) => real.compressBound(n),
      versionString: () => real.versionString(),
      CCtx: class {
        readonly cctx = new real.CCtx();
        compressUsingCDict(dst: Uint8Array, src: Uint8Array, d: object) {
          calls.compress++;
          return this.cctx.compressUsingCDict(dst, src, d);
        }
      },
      DCtx: class {
        readonly dctx = new real.DCtx();
        decompressUsingDDict(dst: Uint8Array, src: Uint8Array, d: object) {
          calls.decompress++;
          return this.dctx.decompressUsingDDict(dst, src, d);
        }
      },
    };
    const report = vi.fn();
    const zstd = selectZstd("native", { loadBinding: () => counting, report });
    const dir = await tempDir();
    await writeQueue(dir, { zstd, compression: "zstd", compressionSampleBytes: 8 * 1024 });
    const consumer = await QueueConsumer.open("q", "c", { driver: fsDriver({ dir }), zstd });
    const got = (await consumer.read({ max: 1000 })).map((m) => m.data);
    await consumer.close();
    expect(got).toEqual([...lines, "short"]);
    expect(calls.compress).toBeGreaterThan(400);
    expect(calls.decompress).toBeGreaterThan(400);
    expect(report).not.toHaveBeenCalled();
  });

  it("the Node entry (openQueue, openConsumer) uses the native one by default, where it loads", async () => {
    expect(await autoZstd()).toBe(await nativeZstd());
    expect(await autoZstd()).not.toBe(await loadZstd());
    const dir = await tempDir();
    const writer = await openQueue("q", { dir, durability: "none", compression: "zstd", compressionSampleBytes: 1024 });
    await writer.pushBatch(lines);
    await writer.close();
    const consumer = await openConsumer("q", "c", { dir });
    expect((await consumer.read({ max: 1000 })).map((m) => m.data)).toEqual(lines);
    await consumer.close();
  });
});

describe("choosing the zstd implementation", () => {
  // Installed, but its addon does not load (built for another Node).
  const broken = () => {
    throw new Error("The module '/app/node_modules/zstd-napi/build/Release/binding.node'\nwas compiled against a different Node.js version");
  };
  // Not installed: a real resolution from a folder with no node_modules on its way up.
  const notInstalled = () => createRequire(join(tmpdir(), "vq-no-packages", "x.js"))("zstd-napi/binding") as NapiBinding;

  it('"auto" falls back to the WebAssembly one when the native one cannot load, saying so in one line, once', async () => {
    const report = vi.fn();
    const zstd = selectZstd("auto", { loadBinding: broken, report });
    expect(await zstd()).toBe(await loadZstd());
    expect(await zstd()).toBe(await loadZstd());
    expect(report).toHaveBeenCalledTimes(1);
    const line = report.mock.calls[0]![0] as string;
    expect(line).not.toContain("\n");
    expect(line).toMatch(/zstd-napi.*not available.*binding\.node'.*WebAssembly/);
  });

  it('"auto" takes the WebAssembly one without a word when zstd-napi is not installed (an optional peer, not asked for)', async () => {
    const report = vi.fn();
    expect(await selectZstd("auto", { loadBinding: notInstalled, report })()).toBe(await loadZstd());
    expect(report).not.toHaveBeenCalled();
  });

  it('"native" without zstd-napi installed fails naming the package to install', async () => {
    const error = await selectZstd("native", { loadBinding: notInstalled })().catch((e: Error) => e);
    expect(error).toBeInstanceOf(ZstdNativeError);
    expect(error).toMatchObject({ code: "E_NOT_INSTALLED" });
    expect((error as Error).message).toBe(
      'The native zstd needs the npm package zstd-napi, which is not installed (an optional peer dependency of v-queue). Install it beside v-queue (`npm install zstd-napi`: it builds a C++ addon where no prebuilt binary fits, with python3, make and a C++ compiler), or use the WebAssembly zstd (`zstd: "wasm"`).',
    );
  });

  it('"native" fails, saying why and what to do, when it cannot load; "wasm" is the WebAssembly one; anything else is refused', async () => {
    const report = vi.fn();
    await expect(selectZstd("native", { loadBinding: broken, report })()).rejects.toMatchObject({
      code: "E_NOT_LOADED",
      message: expect.stringMatching(/native zstd \(npm package zstd-napi\) cannot be loaded: The module '.*binding\.node'\. Reinstall it/),
    });
    expect(report).not.toHaveBeenCalled();
    expect(selectZstd("wasm")).toBe(loadZstd);
    expect(() => selectZstd("zlib" as "wasm")).toThrow('Invalid zstd "zlib": use one of "auto", "native", "wasm".');
  });

  it("a queue written with a fallen-back zstd is read back (the WebAssembly one, through the engine)", async () => {
    const dir = await tempDir();
    const zstd = selectZstd("auto", { loadBinding: broken, report: () => {} });
    await writeQueue(dir, { zstd, compression: "zstd", compressionSampleBytes: 4 * 1024 });
    const consumer = await QueueConsumer.open("q", "c", { driver: fsDriver({ dir }), zstd });
    expect((await consumer.read({ max: 1000 })).map((m) => m.data)).toEqual([...lines, "short"]);
    await consumer.close();
  });
});
