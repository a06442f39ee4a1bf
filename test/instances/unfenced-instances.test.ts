/**
 * Several `v-queue serve` processes (the built CLI) on ONE unstorage storage (unstorage's fs
 * driver on one directory, and unstorage's redis driver on a throw-away redis-server). unstorage
 * cannot fence a write, so a second live instance is refused at start (`E_UNFENCED`, naming the
 * drivers that fence); a restart after a kill -9 starts once the dead one's registration runs
 * out; an instance paused past its lease, superseded meanwhile, acknowledges nothing once
 * resumed (until the other stops), and every message acknowledged is consumed; `instances=many`
 * lets two run at once.
 * Needs `npm run build` (dist/).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, startInstance, type ServeInstance } from "../helpers/multi-instance";
import { redisTestsRun, startRedisServer, type RedisServer } from "../helpers/redis";
import { useTempDirs } from "../helpers/tmp";
import { sleep } from "../helpers/sleep";

/** The instances' lease: a kill -9's registration runs out within it, a pause of three times it is past it. 2 s: a heartbeat late by a second on a loaded machine (two CI runs at once) keeps it. */
const LEASE_MS = 2000;
/**
 * The lease of the refusal test: a live server keeps its registration only while it renews it
 * (every third of the lease). With 2 s, one CI run at load 4 saw the second server start: the
 * first had not renewed within the lease, and losing it then is right. 5 s leaves room.
 */
const LIVE_LEASE_MS = 5000;
const tempDir = useTempDirs("vq-unfenced-");
const started: ServeInstance[] = [];
let redis: RedisServer | undefined;
let lastBase = 0;

const withRedis = redisTestsRun("several servers on one unstorage storage (redis)");
beforeAll(async () => {
  if (withRedis) redis = await startRedisServer();
});
afterAll(async () => {
  for (const instance of started) instance.kill("SIGKILL");
  await redis?.stop();
});

const backends = [
  { backend: "unstorage fs", storage: async (query: string) => `unstorage-fs:${await tempDir()}?${query}` },
  ...(withRedis ? [{ backend: "unstorage redis", storage: async (query: string) => `${redis!.url}?base=vq${++lastBase}&${query}` }] : []),
];

const serve = async (storage: string) => {
  const instance = await startInstance(["--storage", storage]);
  started.push(instance);
  return instance;
};

/** Why `serve` did not start, or "started". */
const refusal = (storage: string) =>
  serve(storage).then(
    () => "started",
    (error: Error) => error.message,
  );

const produce = async (instance: ServeInstance, message: string) => {
  const res = await call(`${instance.url}/api/v1/queues/q/messages`, { method: "POST", body: message });
  return { status: res?.status, body: res ? await res.text() : "" };
};

/** Produces until answered 201: another instance's writer lock (409), or its registration (503), runs out within the lease after a kill. */
const produceOnce = async (instance: ServeInstance, message: string) => {
  for (const deadline = Date.now() + 10 * LIVE_LEASE_MS; ; await sleep(100)) {
    const answer = await produce(instance, message);
    if (answer.status === 201 || (answer.status !== 409 && answer.status !== 503) || Date.now() > deadline) return answer;
  }
};

const consumeAll = async (instance: ServeInstance) => {
  const res = await call(`${instance.url}/api/v1/queues/q/consumers/c/messages?max_messages=1000`);
  expect(res?.status).toBe(200);
  return ((await res!.json()) as { messages: { data: string }[] }).messages.map((m) => m.data);
};

const killed = async (instance: ServeInstance) => {
  const exited = new Promise((resolve) => instance.child!.once("exit", resolve));
  instance.kill("SIGKILL");
  await exited;
};

describe.each(backends)("several servers on one unstorage storage ($backend)", ({ storage: storageWith }) => {
  it("a second live server is refused, naming drivers that fence; after a kill -9 the next one starts and has every message", { timeout: 60_000 }, async () => {
    const storage = await storageWith(`lease=${LIVE_LEASE_MS}`);
    const first = await serve(storage);
    expect((await produce(first, "one")).status).toBe(201);

    const refused = await refusal(storage);
    expect(refused).toMatch(/Another v-queue instance \(pid \d+/);
    expect(refused).toContain(`pid ${first.child!.pid}`);
    expect(refused).toContain("redis+vq://");
    expect(refused).toContain("fs:<dir>?lease=");
    expect(refused).toContain("instances=many");
    // The refused one touched nothing: the first serves on.
    expect((await produce(first, "two")).status).toBe(201);

    await killed(first);
    // Its registration runs out within the lease: the next one waits for that, then starts.
    const next = await serve(storage);
    // The dead one's writer lock may outlive its registration by a renewal: 409 until it runs out too.
    expect((await produceOnce(next, "three")).status).toBe(201);
    expect(await consumeAll(next)).toEqual(["one", "two", "three"]);
  });

  it(
    "a server paused past its lease, another started meanwhile: resumed, it acknowledges nothing, and nothing acknowledged is lost",
    { timeout: 60_000 },
    async () => {
      const storage = await storageWith(`lease=${LEASE_MS}`);
      const paused = await serve(storage);
      expect((await produce(paused, "before")).status).toBe(201);
      paused.kill("SIGSTOP");
      try {
        await sleep(3 * LEASE_MS);
        const other = await serve(storage);
        expect((await produce(other, "while-paused")).status).toBe(201);
        paused.kill("SIGCONT");
        // Its first write after the pause asks the storage first: refused, as is every later one.
        for (let i = 0; i < 5; i++) {
          const answer = await produce(paused, `late-${i}`);
          expect(answer.status, answer.body).toBe(503);
          expect(answer.body).toContain("E_UNFENCED");
        }
        expect((await produce(other, "after")).status).toBe(201);
        expect(await consumeAll(other)).toEqual(["before", "while-paused", "after"]);
        // Not locked out for good: once the other is gone, the superseded one registers again.
        await killed(other);
        expect((await produceOnce(paused, "resumed")).status).toBe(201);
        const res = await call(`${paused.url}/api/v1/queues/q/consumers/late/messages?max_messages=1000`);
        expect(((await res!.json()) as { messages: { data: string }[] }).messages.map((m) => m.data)).toEqual(["before", "while-paused", "after", "resumed"]);
      } finally {
        paused.kill("SIGCONT");
      }
    },
  );

  it("instances=many lets two servers run at once (unfenced, at the user's risk)", { timeout: 60_000 }, async () => {
    const storage = await storageWith(`lease=${LEASE_MS}&instances=many`);
    const a = await serve(storage);
    const b = await serve(storage);
    expect((await produce(a, "from-a")).status).toBe(201);
    await killed(a);
    expect((await produceOnce(b, "from-b")).status).toBe(201);
    expect(await consumeAll(b)).toEqual(["from-a", "from-b"]);
  });
});
