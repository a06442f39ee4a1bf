import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { resolve } from "pathe";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createClient } from "../../client/index";
import { hasRedisServer, startRedisServer, type RedisServer } from "../helpers/redis";
import { startServerProcess, type ServerProcess } from "./_server-process";

const CLI = resolve(import.meta.dirname, "../../adapters/cli.ts");
const run = promisify(execFile);
const cli = (...args: string[]) => run(process.execPath, ["--import", "jiti/register", CLI, ...args], { env: { ...process.env, NO_COLOR: "1" } });

/** `--storage`: the server and the CLI on unstorage over a real redis-server, unchanged. */
describe.skipIf(!hasRedisServer() && !process.env.CI)("server and CLI with --storage redis://", () => {
  let redis: RedisServer;
  let server: ServerProcess;
  beforeAll(async () => {
    redis = await startRedisServer();
    server = await startServerProcess({ storage: `${redis.url}?base=vqtest` });
  }, 60_000);
  afterAll(async () => {
    await server?.remove();
    await redis?.stop();
  });

  it("serves queues kept in Redis, and the CLI reaches the same queues with --storage", async () => {
    const client = createClient({ baseURL: server.url });
    await client.produce("jobs", ["a", "b", "c"]);
    const got = await client.consume("jobs", "w", { maxMessages: 10 });
    expect(got.messages.map((m) => m.data)).toEqual(["a", "b", "c"]);
    await client.commit("jobs", "w");

    // The CLI on the same Redis (another process): the queue, its parts and the consumer are there.
    const { stdout } = await cli("stat", "--storage", `${redis.url}?base=vqtest`, "--json");
    const stats = JSON.parse(stdout) as { name: string; messages: number; consumers: { name: string; lag: number }[] }[];
    expect(stats).toEqual([expect.objectContaining({ name: "jobs", messages: 3, consumers: [expect.objectContaining({ name: "w", lag: 0 })] })]);

    // A restart of the server on the same storage resumes the consumer. (Graceful: after a
    // crash, the Redis lock leases of the dead server must run out first.)
    await server.restart("SIGTERM");
    await client.produce("jobs", "d");
    expect((await client.consume("jobs", "w", { maxMessages: 10 })).messages.map((m) => m.data)).toEqual(["d"]);
  }, 60_000);
});
