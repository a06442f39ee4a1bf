/**
 * A real full disk: the server's data directory on a small tmpfs (mounting needs root or
 * CAP_SYS_ADMIN; without it the test is skipped and says why). Pushes fill it until the kernel
 * answers ENOSPC: those pushes fail with 507 E_IO, every acknowledged message is on disk and
 * read back in order, reads go on, and once space is freed pushes work again without a restart.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, unlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serveQueues, type QueueServer } from "../../adapters/server";

const MOUNT_BYTES = 4 * 1024 * 1024;
const FILLER_BYTES = 3 * 1024 * 1024;
const BODY_BYTES = 16 * 1024;

let root = "";
let mounted = false;
let whyNot = "";

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), "vq-full-"));
  try {
    execFileSync("mount", ["-t", "tmpfs", "-o", `size=${MOUNT_BYTES}`, "tmpfs", root], { stdio: "pipe" });
    mounted = true;
  } catch (error) {
    whyNot = `cannot mount a tmpfs here (${String((error as { stderr?: Buffer }).stderr ?? error).trim()}): needs root or CAP_SYS_ADMIN`;
  }
});

afterAll(() => {
  if (mounted) execFileSync("umount", ["-l", root]);
  rmSync(root, { recursive: true, force: true });
});

const body = (n: number) => `${String(n).padStart(8, "0")}:${"x".repeat(BODY_BYTES - 9)}`;

describe("a real full disk (tmpfs)", () => {
  it("fails pushes with 507 E_IO, keeps every acknowledged message, serves reads, and recovers once space is back", async (ctx) => {
    if (!mounted) {
      console.warn(`full-disk test skipped: ${whyNot}`);
      ctx.skip();
    }
    const dir = join(root, "data");
    const server: QueueServer = await serveQueues({ dir, port: 0, durability: "fsync", logger: { error: () => {}, warn: () => {} } });
    const api = (path: string, init?: RequestInit) => fetch(`${server.url}/api/v1/queues/${path}`, init);
    const push = (text: string) => api("q/messages", { method: "POST", body: text, headers: { "content-type": "text/plain" } });
    const drain = async () => {
      const out: string[] = [];
      for (;;) {
        const res = await api("q/consumers/c/messages?max_messages=50&timeout_ms=0");
        expect(res.status).toBe(200);
        const { messages } = (await res.json()) as { messages: { data: string }[] };
        if (messages.length === 0) return out;
        out.push(...messages.map((m) => m.data.slice(0, 8)));
        expect((await api("q/consumers/c/commit", { method: "POST" })).status).toBe(200);
      }
    };
    try {
      // The consumer exists (its position file too) before the disk fills.
      expect((await push(body(0))).status).toBe(201);
      expect(await drain()).toEqual([body(0).slice(0, 8)]);
      const filler = join(root, "filler");
      writeFileSync(filler, Buffer.alloc(FILLER_BYTES));

      // Pushes in flight eight at a time, until the disk refuses.
      const acked: string[] = [body(0).slice(0, 8)];
      let refused: { status: number; error: { code: string; message: string } } | undefined;
      for (let n = 1; !refused && n < 10_000; n += 8) {
        const results = await Promise.all(
          Array.from({ length: 8 }, (_, i) => push(body(n + i)).then(async (res) => ({ n: n + i, status: res.status, json: await res.json() }))),
        );
        for (const r of results) {
          if (r.status === 201) acked.push(body(r.n).slice(0, 8));
          else refused ??= { status: r.status, error: r.json.error };
        }
      }
      expect(refused, "the disk never filled").toBeDefined();
      expect(refused!.status).toBe(507);
      expect(refused!.error.code).toBe("E_IO");
      expect(refused!.error.message).toContain("ENOSPC");
      expect(acked.length).toBeGreaterThan(10);

      // Reads go on while the disk is full: every acknowledged message, in order of acknowledgement
      // per batch, nothing twice, nothing that was never pushed.
      const read = [...acked.slice(0, 1), ...(await drain())];
      expect(new Set(read).size).toBe(read.length);
      for (const id of acked) expect(read, `acknowledged message ${id} is missing`).toContain(id);
      expect(
        read.filter((id) => !acked.includes(id)),
        "refused messages were handed out",
      ).toEqual([]);

      // Space comes back: pushes work again, with no restart.
      unlinkSync(filler);
      const after = await push(body(99_999));
      expect(after.status).toBe(201);
      expect(await drain()).toEqual([body(99_999).slice(0, 8)]);
    } finally {
      await server.close();
    }
  });
});
