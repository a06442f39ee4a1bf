/**
 * Schedules over HTTP and through the typed client, on a real server: set (201, then 200),
 * listed, removed (404 when none), bad input refused saying what is allowed, firings consumed;
 * and a server started over a directory with schedules fires them with nobody producing.
 */
import { describe, expect, it } from "vitest";
import fsDriver from "../../adapters/drivers/fs";
import { createClient } from "../../client/index";
import { browseMessages } from "../../src/inspect/browse";
import { errorCode, jsonHeaders, startServer } from "./_server";
import { sleep } from "../helpers/sleep";
import { WAKE_TIMEOUT_MS } from "../helpers/timing";

const consume = (queue: string) => `/api/v1/queues/${queue}/consumers/c/messages?max_messages=100&timeout_ms=${WAKE_TIMEOUT_MS}`;
const bodies = async (res: Response) => ((await res.json()) as { messages: { data: string }[] }).messages.map((m) => m.data);
const put = (url: string, body: unknown) => fetch(url, { method: "PUT", body: typeof body === "string" ? body : JSON.stringify(body), headers: jsonHeaders });

describe("HTTP and client: schedules", () => {
  it("are set, listed and removed; their firings are consumed; bad ones get 400 saying what is allowed", async () => {
    const s = await startServer();
    const client = createClient({ baseURL: s.url });
    const set = await client.schedule("jobs", "ping", { everyMs: 200, message: { job: "ping" } });
    expect(set).toMatchObject({ queue: "jobs", created: true, schedule: { name: "ping", everyMs: 200, message: '{"job":"ping"}' } });
    expect(set.schedule.nextAtMs).toBeGreaterThan(set.schedule.sinceMs);
    expect(Date.parse(set.schedule.since)).toBe(set.schedule.sinceMs);
    const raw = await put(`${s.url}/api/v1/queues/jobs/schedules/nightly`, { cron: "0 3 * * *", tz: "Europe/Paris" });
    expect(raw.status).toBe(201);
    expect((await put(`${s.url}/api/v1/queues/jobs/schedules/nightly`, { cron: "0 4 * * *", tz: "Europe/Paris" })).status).toBe(200);
    const got: string[] = [];
    while (got.length < 3) {
      const more = await bodies(await s.get(consume("jobs")));
      expect(more.length, `nothing more came after ${JSON.stringify(got)}`).toBeGreaterThan(0);
      got.push(...more);
    }
    expect(new Set(got)).toEqual(new Set(['{"job":"ping"}']));
    const { schedules } = await client.schedules("jobs");
    expect(schedules.map((x) => [x.name, x.cron ?? x.everyMs])).toEqual([
      ["nightly", "0 4 * * *"],
      ["ping", 200],
    ]);
    expect(schedules[1]!.lastFiredAtMs).toBeGreaterThan(0);
    expect(await client.unschedule("jobs", "ping")).toBe(true);
    expect(await client.unschedule("jobs", "ping")).toBe(false);
    expect((await client.schedules("jobs")).schedules.map((x) => x.name)).toEqual(["nightly"]);

    for (const [body, code, says] of [
      [{ cron: "99 * * * *" }, "E_OPTION", "Invalid cron"],
      [{ cron: "* * * * *", tz: "Nowhere/Else" }, "E_OPTION", "IANA time zone"],
      [{ cron: "* * * * *", everyMs: 1000 }, "E_OPTION", "exactly one of cron and everyMs"],
      [{ everyMs: 1 }, "E_OPTION", "from 100"],
      [{ every: 1000 }, "E_BODY", "Unknown key"],
      ["not json", "E_BODY", "not valid JSON"],
    ] as const) {
      const res = await put(`${s.url}/api/v1/queues/jobs/schedules/bad`, body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      const error = ((await res.json()) as { error: { code: string; message: string } }).error;
      expect(error, JSON.stringify(body)).toMatchObject({ code, message: expect.stringContaining(says) });
    }
    const badName = await put(`${s.url}/api/v1/queues/jobs/schedules/a..b`, { everyMs: 1000 });
    expect(badName.status).toBe(400);
    expect(await errorCode(badName)).toBe("E_NAME");
    expect((await client.schedules("jobs")).schedules.map((x) => x.name)).toEqual(["nightly"]);
  });

  it("a server started over a directory with schedules fires them, though nobody produces", async () => {
    const first = await startServer();
    const client = createClient({ baseURL: first.url });
    await client.schedule("beats", "beat", { everyMs: 200 });
    await sleep(300);
    await first.close();
    const second = await startServer({ dir: first.dir });
    const ticks: number[] = [];
    while (ticks.length < 4) {
      const more = await bodies(await second.get(consume("beats")));
      expect(more.length, `nothing more came after ${ticks.length} firings`).toBeGreaterThan(0);
      ticks.push(...more.map((m) => (JSON.parse(m) as { tick: number }).tick));
    }
    // Each tick once, in order, on the schedule's 200 ms grid.
    for (let i = 1; i < ticks.length; i++) {
      expect(ticks[i]!).toBeGreaterThan(ticks[i - 1]!);
      expect((ticks[i]! - ticks[0]!) % 200).toBe(0);
    }
  });

  it("on a partitioned queue: PUT sets, GET lists, firings come from its partitions, each tick once, also after a restart", async () => {
    const first = await startServer();
    const declared = await fetch(`${first.url}/api/v1/queues/orders`, { method: "PUT", body: JSON.stringify({ partitions: 4 }), headers: jsonHeaders });
    expect(declared.status).toBe(201);
    const set = await put(`${first.url}/api/v1/queues/orders/schedules/beat`, { everyMs: 200 });
    expect(set.status).toBe(201);
    expect(await set.json()).toMatchObject({ queue: "orders", created: true, schedule: { name: "beat", everyMs: 200 } });
    const client = createClient({ baseURL: first.url });
    expect((await client.schedules("orders")).schedules.map((x) => x.name)).toEqual(["beat"]);
    // Consumed (a restart may deliver again what was not committed): the firings themselves are checked on storage below.
    const ticks = new Set<number>();
    const take = async (server: typeof first, atLeast: number) => {
      while (ticks.size < atLeast) {
        const more = await bodies(await server.get(consume("orders")));
        expect(more.length, `nothing more came after ${ticks.size} firings`).toBeGreaterThan(0);
        for (const m of more) ticks.add((JSON.parse(m) as { tick: number }).tick);
      }
    };
    await take(first, 4);
    await first.close();
    // Another server over the directory keeps partition 0's writer: the schedule goes on.
    const second = await startServer({ dir: first.dir });
    await take(second, ticks.size + 4);
    expect((await createClient({ baseURL: second.url }).schedules("orders")).schedules[0]!.lastFiredAtMs).toBeGreaterThan(0);
    expect((await second.del("/api/v1/queues/orders/schedules/beat")).status).toBe(200);
    expect((await createClient({ baseURL: second.url }).schedules("orders")).schedules).toEqual([]);
    await second.close();
    const stored: number[] = [];
    for (let p = 0; p < 4; p++) {
      const page = await browseMessages(fsDriver({ dir: first.dir }), `orders.p${p}`, { from: "earliest", limit: 1000 });
      stored.push(...page.messages.map((m) => (JSON.parse(String(m.data)) as { tick: number }).tick));
    }
    // Each tick once, on the schedule's 200 ms grid, spread over the partitions.
    expect(stored.length).toBeGreaterThanOrEqual(8);
    expect(new Set(stored).size).toBe(stored.length);
    stored.sort((a, b) => a - b);
    for (const tick of stored) expect((tick - stored[0]!) % 200).toBe(0);
  });
});
