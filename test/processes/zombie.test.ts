import { spawn } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { basename } from "pathe";
import { describe, expect, it } from "vitest";
import { freePort } from "../helpers/net";
import { scriptCommand, type Runtime } from "../helpers/runtime";
import { useTempDirs } from "../helpers/tmp";
import { sleep } from "../helpers/sleep";

const CLI = fileURLToPath(new URL("../../adapters/cli.ts", import.meta.url));
const freshDir = useTempDirs("vq-zombie-");

/** A process's state letter from /proc (`Z`: exited, not reaped by its parent yet). */
const procState = (pid: number) => {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  return stat.slice(stat.lastIndexOf(")") + 2)[0];
};

/** `v-queue serve` on `port`: its argv on `runtime`. */
const serveCommand = (runtime: Runtime, storage: string[], port: number) =>
  scriptCommand(CLI, ["serve", ...storage, "--port", String(port), "--durability", "none", "--log-level", "error"], runtime);

/** The owner files a process left beside the leased locks' write mutexes (`.vq-owner~<pid>~<hex>`). */
const ownerFilesOf = (dir: string, pid: number) =>
  readdirSync(dir, { recursive: true, encoding: "utf8" }).filter((name) => basename(name).startsWith(`.vq-owner~${pid}~`));

async function waitForHealth(url: string, exited: () => boolean): Promise<void> {
  const deadline = Date.now() + 90_000;
  while (
    !(await fetch(`${url}/health`).then(
      (r) => r.ok,
      () => false,
    ))
  ) {
    if (exited() || Date.now() > deadline) throw new Error(`the server at ${url} did not start`);
    await sleep(50);
  }
}

const produce = (url: string, body: string) => fetch(`${url}/api/v1/queues/jobs/messages`, { method: "POST", body });
const lease = (url: string) =>
  fetch(`${url}/api/v1/queues/jobs/consumers/workers/lease`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ max: 10 }),
  });

// /proc tells a zombie apart (Linux; Deno reads it only with -A); elsewhere signal 0 is all there is.
// Two server starts each: more than the 30 s default on a loaded machine.
describe.skipIf(!existsSync("/proc/self/stat"))("a server killed -9 whose parent does not reap it", { timeout: 180_000 }, () => {
  // Leased locks (an hour: they do not run out here) add the write mutex, whose owner files name pids too.
  it.each<[Runtime, string]>([
    ["node", "--dir"],
    ["bun", "--dir"],
    ["node", "--storage fs:<dir>?lease=3600000"],
  ])("holds no lock as a zombie: a second server on the same directory produces and leases at once (%s, %s)", async (runtime, storageFlag) => {
    const dir = await freshDir();
    const storage = storageFlag === "--dir" ? ["--dir", dir] : ["--storage", `fs:${dir}?lease=3600000`];
    const [firstPort, secondPort] = [await freePort(), await freePort()];
    // The parent: a shell that starts the server in the background, prints its pid and becomes
    // a `sleep`, which never waits for a child (as a container's PID 1 that does not reap).
    const first = serveCommand(runtime, storage, firstPort);
    const parent = spawn("sh", ["-c", '"$@" >/dev/null & echo $!; exec sleep 600', "sh", first.command, ...first.args], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    let second: ReturnType<typeof spawn> | undefined;
    try {
      const serverPid = Number(await new Promise<string>((resolve) => parent.stdout.once("data", (c: Buffer) => resolve(c.toString().trim()))));
      const firstUrl = `http://127.0.0.1:${firstPort}`;
      await waitForHealth(firstUrl, () => parent.exitCode !== null);
      // It holds the queue's writer lock and the shared consumer's lock.
      expect((await produce(firstUrl, "before")).status).toBe(201);
      expect((await lease(firstUrl)).status).toBe(200);

      process.kill(serverPid, "SIGKILL");
      while (procState(serverPid) !== "Z") await sleep(20);

      const next = serveCommand(runtime, storage, secondPort);
      second = spawn(next.command, next.args, { stdio: ["ignore", "ignore", "inherit"] });
      const secondUrl = `http://127.0.0.1:${secondPort}`;
      await waitForHealth(secondUrl, () => second!.exitCode !== null);
      expect(procState(serverPid)).toBe("Z"); // still unreaped: its lock files name it
      const produced = await produce(secondUrl, "after");
      expect(produced.status, await produced.clone().text()).toBe(201);
      const leased = await lease(secondUrl);
      expect(leased.status, await leased.clone().text()).toBe(200);
      const { messages } = (await leased.json()) as { messages: { data: string }[] };
      // "before" was leased by the dead server (its lease runs on) or comes again; "after" is new.
      expect(messages.map((m) => m.data)).toContain("after");
      // What the dead server left is cleared as a dead process's leftovers.
      expect(ownerFilesOf(dir, serverPid)).toEqual([]);
    } finally {
      second?.kill("SIGKILL");
      parent.kill("SIGKILL"); // the zombie goes to init, which reaps it
    }
  });
});
