import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { loadServeConfig, parseBind } from "../../adapters/config";
import fsDriver from "../../adapters/drivers/fs";
import { QueueWriter } from "../../src/writer/writer";
import { basic } from "./_server";
import { expectEndedEarly } from "../helpers/timing";
import { sleep } from "../helpers/sleep";
import { useTempDirs } from "../helpers/tmp";

const cli = fileURLToPath(new URL("../../adapters/cli.ts", import.meta.url));
const repoRoot = fileURLToPath(new URL("../../", import.meta.url));
const tempRoot = useTempDirs("vq-cli-");

describe("configuration", () => {
  it("layers defaults < config file < environment < flags", async () => {
    const cwd = tempRoot();
    writeFileSync(
      join(cwd, "vqueue.config.json"),
      JSON.stringify({ port: 7001, dir: "./from-file", durability: "none", auth: { users: [{ username: "u", password: "p" }] } }),
    );
    let config = await loadServeConfig({ cwd, env: {} });
    expect(config).toMatchObject({ port: 7001, dir: "./from-file", durability: "none", host: "127.0.0.1", logLevel: "info" });
    expect(config.configFile).toBe(join(cwd, "vqueue.config.json"));
    expect(config.auth).toMatchObject({ users: [{ username: "u" }] });
    config = await loadServeConfig({ cwd, env: { VQUEUE_PORT: "7002", VQUEUE_NO_AUTH: "1" } });
    expect(config).toMatchObject({ port: 7002, auth: false });
    config = await loadServeConfig({ cwd, env: { VQUEUE_PORT: "7002", VQUEUE_USERS: "a:b,c:d:e" }, overrides: { port: 7003 } });
    expect(config.port).toBe(7003);
    expect(config.auth).toEqual({
      users: [
        { username: "a", password: "b" },
        { username: "c", password: "d:e" },
      ],
    });
    const none = await loadServeConfig({ cwd: tempRoot(), env: {} });
    expect(none).toMatchObject({ port: 9093, dir: "./queues", auth: false });
    expect(none.configFile).toBeUndefined();
  });

  it("refuses bad values and a missing --config file with a clear error", async () => {
    await expect(loadServeConfig({ cwd: tempRoot(), env: { VQUEUE_PORT: "99999" } })).rejects.toThrow(
      "Invalid VQUEUE_PORT 99999: use an integer from 0 to 65535.",
    );
    await expect(loadServeConfig({ cwd: tempRoot(), env: {}, overrides: { durability: "sometimes" as "none" } })).rejects.toThrow(/Invalid durability/);
    await expect(loadServeConfig({ cwd: tempRoot(), env: {}, configFile: "./nope.json" })).rejects.toThrow(/nope\.json/);
  });

  it("parses the Rust server's --bind", () => {
    expect(parseBind("0.0.0.0:9093")).toEqual({ host: "0.0.0.0", port: 9093 });
    expect(parseBind("[::1]:8080")).toEqual({ host: "::1", port: 8080 });
    expect(parseBind(":7000")).toEqual({ host: undefined, port: 7000 });
    expect(() => parseBind("a:b:c")).toThrow(/Invalid --bind/);
  });
});

describe("v-queue serve", () => {
  it("serves with auth from --config, and on SIGTERM answers parked polls, finishes and releases every lock", async () => {
    const root = tempRoot();
    const dir = join(root, "data");
    writeFileSync(join(root, "conf.json"), JSON.stringify({ auth: { users: [{ username: "admin", password: "pw" }] }, metrics: { open: true } }));
    const child = spawn(
      process.execPath,
      ["--import", "jiti/register", cli, "serve", "--port", "0", "--data-dir", dir, "--config", join(root, "conf.json"), "--durability", "none"],
      {
        cwd: repoRoot,
        env: { ...process.env, VQUEUE_PORT: "", CONSOLA_LEVEL: "" },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let output = "";
    child.stdout.on("data", (c: Buffer) => (output += c));
    child.stderr.on("data", (c: Buffer) => (output += c));
    const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
    try {
      const url = await new Promise<string>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no URL in: ${output}`)), 20_000);
        child.stdout.on("data", () => {
          const match = /on (http:\/\/127\.0\.0\.1:\d+)/.exec(output);
          if (match) {
            clearTimeout(timer);
            resolve(match[1]!);
          }
        });
      });
      expect(output).toContain("auth on");
      const auth = basic("admin", "pw");
      expect((await fetch(`${url}/api/v1/queues`)).status).toBe(401);
      // `metrics: { open: true }` from the config file: scraped without credentials, the Node process series in.
      const metrics = await fetch(`${url}/metrics`);
      expect(metrics.status).toBe(200);
      expect(await metrics.text()).toMatch(/^process_open_fds \d+$/m);
      expect((await fetch(`${url}/api/v1/queues/q/messages`, { method: "POST", body: "x", headers: auth })).status).toBe(201);
      await fetch(`${url}/api/v1/queues/q/consumers/c/messages`, { headers: auth });
      const parked = fetch(`${url}/api/v1/queues/q/consumers/c/messages?timeout_ms=30000`, { headers: auth });
      await sleep(200);
      const t = performance.now();
      child.kill("SIGTERM");
      const res = await parked;
      expect(res.status).toBe(200);
      expect((await res.json()).messages).toEqual([]);
      expect(await exited).toBe(0);
      // The SIGTERM, not the poll's 30 s timeout, ended the wait and the process.
      expectEndedEarly(t, 30_000);
      expect(output).toContain("Closed.");
      // The writer lock is free: another writer can open the queue.
      const writer = await QueueWriter.open("q", { driver: fsDriver({ dir }), durability: "none" });
      await writer.close();
    } finally {
      child.kill("SIGKILL");
    }
  });

  it("fails with one clear line when the port is taken", async () => {
    const blocker = spawn(process.execPath, ["-e", "require('node:http').createServer().listen(0,'127.0.0.1',function(){console.log(this.address().port)})"], {
      stdio: ["ignore", "pipe", "ignore"],
    });
    try {
      const port = await new Promise<string>((resolve) => blocker.stdout.once("data", (c: Buffer) => resolve(c.toString().trim())));
      const run = spawn(process.execPath, ["--import", "jiti/register", cli, "serve", "--port", port, "--dir", join(tempRoot(), "d")], {
        cwd: repoRoot,
        stdio: ["ignore", "pipe", "pipe"],
      });
      let output = "";
      run.stdout.on("data", (c: Buffer) => (output += c));
      run.stderr.on("data", (c: Buffer) => (output += c));
      const code = await new Promise<number | null>((resolve) => run.once("exit", resolve));
      expect(code).toBe(1);
      expect(output).toContain(`Port ${port} on 127.0.0.1 is taken`);
      expect(output).not.toContain("    at ");
    } finally {
      blocker.kill();
    }
  });
});
