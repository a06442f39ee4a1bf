import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "pathe";
import { describe, expect, it } from "vitest";
import { configProblems } from "../../adapters/config-schema";
import { loadServeConfig } from "../../adapters/config";
import { useTempDirs } from "../helpers/tmp";
import { cli, STACK, startCli, until } from "./_cli";

const tempDir = useTempDirs("vq-cli-setup-");

describe("the config schema", () => {
  it("reports every problem of a config at once, each with its path", async () => {
    const cwd = await tempDir();
    writeFileSync(
      join(cwd, "vqueue.config.json"),
      JSON.stringify({
        durabilty: "none",
        port: "9093",
        auth: { users: [{ username: "a" }, { username: "b", password: "p", read: "orders" }, { username: "a", password: "q", write: [1] }] },
        limits: { maxMessages: -1 },
        cors: { origin: "https://x.example" },
      }),
    );
    const error = (await loadServeConfig({ cwd, env: {} }).catch((e: unknown) => e)) as { code: string; problems: string[]; message: string };
    expect(error.code).toBe("E_CONFIG");
    expect(error.problems).toEqual([
      'Unknown key "durabilty" (did you mean "durability"?).',
      'Invalid port "9093": use an integer from 0 to 65535.',
      "Missing auth.users[0].password.",
      'Invalid auth.users[1].read "orders": use true (every queue), false or a list of queue names, e.g. ["orders"].',
      'Invalid auth.users[2].write [1]: use true (every queue), false or a list of queue names, e.g. ["orders"].',
      'Invalid auth.users[2].username "a": given twice.',
      "Invalid limits.maxMessages -1: use an integer from 0 up.",
      "Invalid limits.defaultMessages 1: use 1..maxMessages (-1).",
      'Invalid cors.origin "https://x.example": use "*" or a list of origins, e.g. ["https://app.example.com"].',
    ]);
    expect(error.message).toContain(join(cwd, "vqueue.config.json"));
  });

  it("takes every valid key", () => {
    expect(
      configProblems({
        dir: "./q",
        storage: "memory:",
        host: "::1",
        port: 0,
        durability: "interval",
        start: "latest",
        syncCommits: false,
        maxConsumers: 32,
        consumerIdleMs: 0,
        auth: { enabled: true, realm: "r", users: [{ username: "u", password: "", read: ["orders"], write: false }] },
        limits: { maxBodyBytes: 1, maxMessages: 5, defaultMessages: 5, maxTimeoutMs: 10, defaultTimeoutMs: 10, maxResponseBytes: 1, maxBatchMessages: 1 },
        cors: { origin: "*", maxAge: 0 },
        logLevel: "trace",
        retention: { maxAgeMs: 86_400_000, maxBytes: 1e10, maxParts: 100, deleteConsumed: true, intervalMs: 1000, maxPartsPerRound: 4 },
        queues: { orders: { retention: { maxParts: 3 } }, audit: {} },
      }),
    ).toEqual([]);
    expect(configProblems({ auth: false, cors: false })).toEqual([]);
    expect(configProblems({ maxConsumers: 0, consumerIdleMs: -1 })).toEqual([
      "Invalid maxConsumers 0: use an integer from 1 up.",
      "Invalid consumerIdleMs -1: use an integer from 0 up.",
    ]);
  });

  it("checks retention, the default and each queue's, with the path of every problem", () => {
    expect(
      configProblems({
        retention: { maxAgeMs: "1d", maxParts: 0, keep: 1 },
        queues: { "bad name!": { retention: {} }, orders: { retention: { deleteConsumed: "yes" }, colour: "red" }, audit: 3 },
      }),
    ).toEqual([
      'Invalid retention.maxAgeMs "1d": use an integer from 1 up.',
      "Invalid retention.maxParts 0: use an integer from 1 up.",
      'Unknown key "retention.keep": use maxAgeMs, maxBytes, maxParts, deleteConsumed, intervalMs, maxPartsPerRound.',
      'Invalid queue name "bad name!" in queues.',
      'Unknown key "queues.orders.colour": use retention, shared or partitions.',
      'Invalid queues.orders.retention.deleteConsumed "yes": use true or false.',
      'Invalid queues.audit 3: expected { "retention": { ... }, "shared": { ... }, "partitions": P }.',
    ]);
    expect(configProblems({ retention: [1] })).toEqual([expect.stringMatching(/^Invalid retention \[1\]: expected an object/)]);
  });

  it("checks the monitor's settings", () => {
    expect(configProblems({ monitor: { sampleMs: 1000, historyPoints: 60, idleMs: 0 } })).toEqual([]);
    expect(configProblems({ monitor: { sampleMs: 10, historyPoints: "many", every: 1 } })).toEqual([
      'Unknown key "monitor.every": use sampleMs, historyPoints, idleMs or firstAnswerMs.',
      "Invalid monitor.sampleMs 10: use an integer from 100 to 3600000.",
      'Invalid monitor.historyPoints "many": use an integer from 2 to 100000.',
    ]);
    expect(configProblems({ monitor: 5 })).toEqual(["Invalid monitor 5: expected { sampleMs, historyPoints, idleMs, firstAnswerMs }."]);
  });
});

describe("v-queue serve fails at start with a clear message", () => {
  const serve = async (args: string[], config?: unknown) => {
    const root = await tempDir();
    if (config !== undefined) writeFileSync(join(root, "conf.json"), JSON.stringify(config));
    const run = await cli(["serve", "--port", "0", ...(config === undefined ? [] : ["--config", join(root, "conf.json")]), ...args], { cwd: root });
    expect(run.code).toBe(1);
    expect(run.stdout + run.stderr).not.toMatch(STACK);
    expect(run.stdout + run.stderr).not.toContain("serving");
    return run.stdout + run.stderr;
  };

  it("on a --dir that is a file", async () => {
    const root = await tempDir();
    writeFileSync(join(root, "file"), "x");
    expect(await serve(["--dir", join(root, "file")])).toContain(`Data directory ${join(root, "file")} is not a directory.`);
  });

  it.runIf(process.platform === "linux")("on a data directory where no file can be created", async () => {
    // Root may write anywhere on a normal mount: /proc is a directory nobody can create files in.
    expect(await serve(["--dir", "/proc"])).toMatch(/Data directory \/proc is not writable \(E[A-Z]+\)\./);
  });

  it("on a config with a user without a password, an unknown key and a wrong type: all of them", async () => {
    const output = await serve([], {
      durabilty: "none",
      auth: { users: [{ username: "admin" }, { username: "billing", password: "s3cret", read: "orders" }] },
    });
    expect(output).toContain("3 problems in the configuration");
    expect(output).toContain('Unknown key "durabilty" (did you mean "durability"?)');
    expect(output).toContain("Missing auth.users[0].password.");
    expect(output).toContain('Invalid auth.users[1].read "orders"');
    expect(output).not.toContain("s3cret");
  });

  it("on a host that is not loopback without users, unless told --no-auth (or VQUEUE_NO_AUTH=1)", async () => {
    const output = await serve(["--host", "0.0.0.0"]);
    expect(output).toContain("Refusing to serve on 0.0.0.0 without auth: anyone who can reach it could read, change and delete queues.");
    expect(output).toContain("--no-auth");
    for (const [args, env] of [
      [["--no-auth"], {}],
      [[], { VQUEUE_NO_AUTH: "1" }],
    ] as const) {
      const root = await tempDir();
      const run = startCli(["serve", "--port", "0", "--host", "0.0.0.0", "--dir", join(root, "d"), ...args], { cwd: root, env });
      try {
        // The warning (stderr) follows the "serving" line (stdout): both are waited for.
        const started = await until(run.output, (r) => r.stdout.includes("serving") && r.stderr.includes("Auth is off"));
        expect(started.stderr).toContain("Auth is off and 0.0.0.0 is not loopback");
      } finally {
        run.child.kill("SIGKILL");
        await run.exited;
      }
    }
  });

  it("on a bad value from the environment", async () => {
    const root = await tempDir();
    const run = await cli(["serve", "--dir", join(root, "d")], { cwd: root, env: { VQUEUE_PORT: "abc", VQUEUE_DURABILITY: "always" } });
    expect(run.code).toBe(1);
    // Each variable named, with its value, at once.
    expect(run.stderr).toContain('Invalid VQUEUE_PORT "abc": use an integer from 0 to 65535.');
    expect(run.stderr).toContain('Invalid VQUEUE_DURABILITY "always"');
    expect(run.stderr).not.toMatch(STACK);
  });
});

describe("serve with a compressionDictionary file", () => {
  it("missing: a clear error at start, exit 1", async () => {
    const root = await tempDir();
    writeFileSync(join(root, "conf.json"), JSON.stringify({ compression: "zstd", compressionDictionary: "./logs.dict" }));
    const run = await cli(["serve", "--port", "0", "--dir", join(root, "d"), "--config", join(root, "conf.json")], { cwd: root });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(`Cannot read compressionDictionary "./logs.dict" (${join(root, "logs.dict")}): no such file`);
    expect(run.stderr).not.toMatch(STACK);
    writeFileSync(join(root, "tiny.dict"), "tiny");
    const short = await cli(["serve", "--port", "0", "--dir", join(root, "d"), "--compression-dictionary", "tiny.dict"], {
      cwd: root,
      env: { VQUEUE_COMPRESSION: "zstd" },
    });
    expect(short.code).toBe(1);
    expect(short.stderr).toContain('Invalid compressionDictionary "tiny.dict" of 4 bytes: use at least 8 bytes of content.');
  });

  it("present: every compressed part gets it as its Q_dict", async () => {
    const root = await tempDir();
    const dict = readFileSync(join(import.meta.dirname, "..", "fixtures", "v3", "dict.trained"));
    writeFileSync(join(root, "logs.dict"), dict);
    const server = startCli(["serve", "--port", "0", "--dir", join(root, "d"), "--no-auth", "--compression", "zstd"], {
      cwd: root,
      env: { VQUEUE_COMPRESSION_DICTIONARY: "./logs.dict" },
    });
    try {
      const url = /on (http:\/\/127\.0\.0\.1:\d+)/.exec(
        (await until(server.output, (r) => /on http:\/\/127/.test(r.stdout + r.stderr))).stdout + server.output().stderr,
      )![1]!;
      const line = JSON.stringify({ level: "info", service: "checkout", msg: "request completed in 12 ms", http: { method: "GET", status: 200 } });
      expect((await fetch(`${url}/api/v1/queues/logs/messages`, { method: "POST", body: line, headers: { "content-type": "text/plain" } })).status).toBe(201);
      expect(readFileSync(join(root, "d", "logs-0", "logs_dict"))).toEqual(dict);
    } finally {
      server.child.kill("SIGTERM");
      await server.exited;
    }
  });
});

describe("direct commands on a bad --dir", () => {
  it("push --dir /etc/passwd (a file): one line, exit 1", async () => {
    const root = await tempDir();
    writeFileSync(join(root, "file"), "x");
    for (const args of [["push", "q", "hello"], ["consume", "q", "c"], ["tail", "q"], ["stat"]]) {
      const run = await cli([...args, "--dir", join(root, "file")]);
      expect(run.code, args.join(" ")).toBe(1);
      expect(run.stderr).toContain(`Data directory ${join(root, "file")} is not a directory.`);
      expect(run.stderr).not.toMatch(STACK);
    }
  });

  it("push into a directory it cannot create: the system's message, no stack", async () => {
    const root = await tempDir();
    writeFileSync(join(root, "file"), "x");
    const run = await cli(["push", "q", "hello", "--dir", join(root, "file", "sub")]);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/ENOTDIR/);
    expect(run.stderr).not.toMatch(STACK);
    expect(existsSync(join(root, "file", "sub"))).toBe(false);
  });
});
