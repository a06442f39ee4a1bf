/**
 * `v-queue serve` started while its Redis is down (a failover, Redis restarting): it waits for
 * the storage and starts once Redis answers, instead of exiting. Before, the first failed read
 * at start (declaring a configured partitioned queue) ended the process.
 */
import { writeFileSync } from "node:fs";
import { join } from "pathe";
import { afterAll, describe, expect, it } from "vitest";
import { freePort } from "../helpers/net";
import { launchRedis, redisTestsRun, terminate } from "../helpers/redis";
import { useTempDirs } from "../helpers/tmp";
import { startCli, until } from "./_cli";
import { sleep } from "../helpers/sleep";

const tempDir = useTempDirs("vq-cli-outage-");

describe.skipIf(!redisTestsRun("serve through a storage outage"))("serve through a storage outage at start", () => {
  const stops: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const stop of stops) await stop();
  });

  it("waits for Redis instead of exiting, then serves the configured partitioned queue", { timeout: 90_000 }, async () => {
    const dir = await tempDir();
    const redisPort = await freePort();
    const port = await freePort();
    writeFileSync(join(dir, "vqueue.config.json"), JSON.stringify({ queues: { events: { partitions: 3 } } }));
    const run = startCli(["serve", "--storage", `redis+vq://127.0.0.1:${redisPort}/0`, "--config", join(dir, "vqueue.config.json"), "--port", String(port)]);
    stops.push(async () => {
      run.child.kill("SIGKILL");
      await run.exited;
    });
    // ioredis gives up on a command after its retries (about 10 s): the server says so and tries again.
    await until(run.output, (r) => r.stderr.includes("The storage failed at start"), 60_000);
    expect(run.output().code).toBeNull();
    expect(
      await fetch(`http://127.0.0.1:${port}/health`).then(
        (r) => r.status,
        () => "refused",
      ),
    ).toBe("refused");

    const redis = await launchRedis(redisPort, dir);
    stops.push(() => terminate(redis));
    const deadline = Date.now() + 30_000;
    while (
      !(await fetch(`http://127.0.0.1:${port}/health`).then(
        (r) => r.ok,
        () => false,
      )) &&
      Date.now() < deadline
    )
      await sleep(100);
    const res = await fetch(`http://127.0.0.1:${port}/api/v1/queues/events/messages`, { method: "POST", body: "hello", headers: { "partition-key": "k" } });
    expect(res.status).toBe(201);
    const info = (await (await fetch(`http://127.0.0.1:${port}/api/v1/queues/events`)).json()) as { partitions?: number; messages?: number };
    expect(info).toMatchObject({ partitions: 3, messages: 1 });
  });
});
