/**
 * The client SDK benchmark of issue 4: messages/s that a `subscribe` loop receives and
 * commits, beside raw HTTP consume (plain `fetch`, binary batches of 1000, each committed with
 * the next request's `?commit=`) in the same run, against the built standalone server in a
 * child process. One sequential loop each, so the ratio compares like with like.
 */
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { createClient } from "v-queue/client";
import { BATCH_CONTENT_TYPE, decodeBatch } from "v-queue/runtime";
import { formatRate, formatTable, freePort, median, progress, removeDir, tempDir } from "./util";

const MESSAGES = Math.round(200_000 * (Number(process.env.VQ_BENCH_SCALE) || 1));
const REPEATS = Math.max(1, Number(process.env.VQ_BENCH_REPEATS) || 3);
const BATCH = 1000;
const TARGET = 0.95;
const BIN = fileURLToPath(new URL("../bin/v-queue.mjs", import.meta.url));

export async function runClientBench(): Promise<void> {
  console.log(`\n## Client SDK (subscribe vs raw HTTP consume, ${MESSAGES} messages of 100 B, batches of ${BATCH}, median of ${REPEATS})\n`);
  const dir = tempDir("vq-bench-client");
  const port = await freePort();
  const server = spawn(process.execPath, [BIN, "serve", "--dir", dir, "--port", String(port), "--no-auth", "--durability", "none", "--log-level", "warn"], {
    stdio: "inherit",
  });
  const baseURL = `http://127.0.0.1:${port}`;
  try {
    await waitForHealth(baseURL);
    const client = createClient({ baseURL });
    progress(`filling the queue with ${MESSAGES} messages ...`);
    const payload = Array.from({ length: BATCH }, (_, i) => `${i}`.padEnd(100, "x"));
    for (let sent = 0; sent < MESSAGES; sent += BATCH) await client.produce("bench", payload, { format: "binary" });

    const raw: number[] = [];
    const sub: number[] = [];
    for (let run = 0; run < REPEATS; run++) {
      progress(`run ${run + 1}/${REPEATS}: raw HTTP consume ...`);
      raw.push(await rawConsume(baseURL, `raw${run}`));
      progress(`run ${run + 1}/${REPEATS}: subscribe ...`);
      sub.push(await subscribeConsume(client, `sub${run}`));
    }
    const rawRate = median(raw);
    const subRate = median(sub);
    const ratio = subRate / rawRate;
    console.log(
      formatTable(
        ["scenario", "msgs/s", "ratio", "target", "result"],
        [
          ["raw HTTP consume (fetch, binary, commit per batch)", formatRate(rawRate), "1.00x", "-", ""],
          [
            "client subscribe() loop (binary, commit per batch)",
            formatRate(subRate),
            `${ratio.toFixed(2)}x raw`,
            `>= ${TARGET}`,
            ratio >= TARGET ? "PASS" : "FAIL",
          ],
        ],
      ),
    );
  } finally {
    server.kill("SIGTERM");
    await new Promise((done) => server.once("exit", done));
    removeDir(dir);
  }
}

/** Consumes the whole queue with plain fetch: each request commits the previous batch. */
async function rawConsume(baseURL: string, consumer: string): Promise<number> {
  const start = performance.now();
  let received = 0;
  let cursor: string | null = null;
  while (received < MESSAGES) {
    const commit: string = cursor ? `&commit=${cursor}` : "";
    const res = await fetch(`${baseURL}/api/v1/queues/bench/consumers/${consumer}/messages?max_messages=${BATCH}${commit}`, {
      headers: { accept: BATCH_CONTENT_TYPE },
    });
    const batch = decodeBatch(new Uint8Array(await res.arrayBuffer()));
    received += batch.length;
    cursor = res.headers.get("x-vq-cursor");
  }
  await fetch(`${baseURL}/api/v1/queues/bench/consumers/${consumer}/commit?cursor=${cursor}`, { method: "POST" });
  return received / ((performance.now() - start) / 1000);
}

async function subscribeConsume(client: ReturnType<typeof createClient>, consumer: string): Promise<number> {
  const start = performance.now();
  const controller = new AbortController();
  let received = 0;
  for await (const _message of client.subscribe("bench", consumer, { signal: controller.signal, maxMessages: BATCH, format: "binary" })) {
    if (++received === MESSAGES) controller.abort();
  }
  return received / ((performance.now() - start) / 1000);
}

async function waitForHealth(baseURL: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (
      await fetch(`${baseURL}/health`).then(
        (r) => r.ok,
        () => false,
      )
    )
      return;
    await new Promise((done) => setTimeout(done, 50));
  }
  throw new Error("the server did not start");
}
