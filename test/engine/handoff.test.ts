import { describe, expect, it } from "vitest";
import memoryDriver from "../../adapters/drivers/memory";
import { readWant, writeWant } from "../../src/handoff";
import { Members } from "../../src/members";
import { writeWhole } from "../../src/write-whole";

describe("hand-over requests", () => {
  it("carry how many instances the asker counts; a marker of an older version reads without", async () => {
    const driver = memoryDriver({ name: "handoff-markers" });
    await writeWant(driver, "q.p0_info_wantc_c", "a1", { members: 3 });
    expect(await readWant(driver, "q.p0_info_wantc_c", "b2")).toEqual({ by: "a1", members: 3 });
    // The asker's own marker asks nothing of it.
    expect(await readWant(driver, "q.p0_info_wantc_c", "a1")).toBeUndefined();
    await writeWhole(driver, "q.p0_info_wantc_c", new TextEncoder().encode(`v-queue want ${Date.now()} a1\n`), false);
    expect(await readWant(driver, "q.p0_info_wantc_c", "b2")).toEqual({ by: "a1" });
    // Stale or damaged: no request.
    await writeWhole(driver, "q.p0_info_wantc_c", new TextEncoder().encode(`v-queue want ${Date.now() - 60_000} a1\nidle\n`), false);
    expect(await readWant(driver, "q.p0_info_wantc_c", "b2")).toBeUndefined();
    await writeWhole(driver, "q.p0_info_wantc_c", new TextEncoder().encode("garbage"), false);
    expect(await readWant(driver, "q.p0_info_wantc_c", "b2")).toBeUndefined();
  });
});

describe("members", () => {
  it("counts the instances that polled lately, itself included; one that leaves or stops is no longer counted", async () => {
    const driver = memoryDriver({ name: "members" });
    const path = "q.p0_info_wantm_c";
    const at = (id: string) => new Members(driver, path, id);
    const [a, b, c] = ["a1", "b2", "c3"].map(at) as [Members, Members, Members];
    expect(await a.refresh()).toBe(1);
    expect(await b.refresh()).toBe(2);
    expect(await c.refresh()).toBe(3);
    expect(c.share(8)).toEqual({ floor: 2, ceil: 3 });
    // An asker counts before its line is read.
    await a.refresh();
    a.saw("d4");
    expect(a.count).toBe(4);
    await b.leave();
    expect(await at("e5").refresh()).toBe(3);
    // A line older than four beats is of an instance that stopped polling (or died).
    const text = new TextDecoder().decode(await driver.readRecord(path));
    await writeWhole(driver, path, new TextEncoder().encode(text.replace(/^a1 \d+$/m, `a1 ${Date.now() - 10_000}`)), false);
    expect(await at("f6").refresh()).toBe(3);
    // A damaged record counts nobody else.
    await writeWhole(driver, path, new TextEncoder().encode("not a members record"), false);
    expect(await at("g7").refresh()).toBe(1);
  });
});
