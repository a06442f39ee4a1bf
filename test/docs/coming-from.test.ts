/**
 * docs/coming-from.md: each program and its v-queue counterpart run as written (only the
 * addresses change) and print the same: BullMQ and Redis Streams against a throw-away
 * redis-server, v-queue against a real server and on files. dist/ first (`npm run build`).
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { useServer } from "../cli/_cli";
import { codeBlocks, pointed, runUntil, useScripts } from "../helpers/doc-scripts";
import { redisTestsRun, startRedisServer, type RedisServer } from "../helpers/redis";
import { useTempDirs } from "../helpers/tmp";

const run = promisify(execFile);
const PAGE = "docs/coming-from.md";
const [bullmq, vqWorker, streams, vqConsume, vqLibrary] = codeBlocks(PAGE, "js");

describe("docs/coming-from.md's programs", () => {
  const tempDir = useTempDirs("vq-coming-from-");
  const server = useServer(tempDir);
  const script = useScripts();
  const toServer = (source: string) => pointed(source, "http://127.0.0.1:9093", server.url);
  /** Runs a program that runs until stopped, and expects it to print `line` and nothing else. */
  const expectPrints = async (name: string, source: string, line: string) => {
    const { lines } = await runUntil(script(name, source), [line]);
    expect(lines).toEqual([line]);
  };

  it("has the five JavaScript programs, in order", () => {
    expect(codeBlocks(PAGE, "js")).toHaveLength(5);
    expect(bullmq).toContain('from "bullmq"');
    expect(streams).toContain('from "ioredis"');
    expect(vqLibrary).toContain('from "v-queue"');
  });

  it("the worker prints what BullMQ's worker prints", { timeout: 60_000 }, async () => {
    await expectPrints("worker.mjs", toServer(vqWorker!), "sending to ada@example.com");
  });

  it("the consume loop prints what the XREADGROUP loop prints", { timeout: 60_000 }, async () => {
    await expectPrints("consume.mjs", toServer(vqConsume!), '{"id":42}');
  });

  it("the library program prints what the crate's prints", { timeout: 60_000 }, async () => {
    const { stdout } = await run(process.execPath, [script("library.mjs", vqLibrary!)], { cwd: tempDir() });
    expect(stdout).toBe("hello\n");
  });

  if (redisTestsRun("docs/coming-from.md's programs on Redis")) {
    describe("on Redis", () => {
      let redis: RedisServer;
      beforeAll(async () => void (redis = await startRedisServer()));
      afterAll(() => redis?.stop());
      const toRedis = (source: string) => pointed(source, "port: 6379", `port: ${redis.port}`);

      it("BullMQ's worker prints what v-queue's does", { timeout: 60_000 }, async () => {
        await expectPrints("bullmq.mjs", toRedis(bullmq!), "sending to ada@example.com");
      });

      it("the XREADGROUP loop prints what v-queue's consume loop does", { timeout: 60_000 }, async () => {
        await expectPrints("streams.mjs", toRedis(streams!), '{"id":42}');
      });
    });
  }
});
