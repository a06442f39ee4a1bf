import { describe, expect, it } from "vitest";
import memoryDriver from "../../adapters/drivers/memory";
import type { QueueProblem } from "../../src/core/errors";
import { formatPushInfo } from "../../src/format/info";
import { HEADER_SIZE, TYPE_STRING, writeRecord } from "../../src/format/record";
import { readInfoLine, recoverPart, scanPartEnd } from "../../src/log/recovery";

const text = new TextEncoder();

function records(bodies: string[]): Uint8Array {
  const size = bodies.reduce((sum, b) => sum + HEADER_SIZE + b.length, 0);
  const bytes = new Uint8Array(size);
  const view = new DataView(bytes.buffer);
  let at = 0;
  bodies.forEach((body, i) => {
    bytes.set(text.encode(body), at + HEADER_SIZE);
    writeRecord(bytes, view, at, at, body.length, i + 1, TYPE_STRING);
    at += HEADER_SIZE + body.length;
  });
  return bytes;
}

describe("recovery", () => {
  it("scanPartEnd finds the end of the valid records, damage kept in place, and a torn tail", async () => {
    const whole = records(["a", "bb", "ccc"]);
    const file = (await memoryDriver().openLog("p", { create: true }))!;
    await file.append(0, whole);
    await file.append(whole.length, whole.subarray(0, 10)); // half a header
    const end = await scanPartEnd(file, 0, 0, whole.length + 10);
    expect(end).toEqual({ edge: whole.length, count: 3, damage: [], tail: { offset: whole.length, bytes: 10 } });
  });

  it("recoverPart cuts a torn tail, reports it, and says the info line is stale", async () => {
    const driver = memoryDriver();
    const whole = records(["a", "bb"]);
    await driver.mkdir("q-0");
    const file = (await driver.openLog("q-0/q_queue", { create: true }))!;
    await file.append(0, whole);
    await file.append(whole.length, new Uint8Array([1, 2, 3]));
    const info = (await driver.openRecord("q-0/q_info_push", { create: true }))!;
    await info.replace(text.encode(formatPushInfo({ queue: "q", edge: 26, count: 1 })));
    const problems: QueueProblem[] = [];
    const recovered = await recoverPart(driver, "q", 0, file, (p) => problems.push(p));
    expect(recovered).toEqual({ edge: whole.length, count: 2, infoStale: true });
    expect(await file.size()).toBe(whole.length);
    expect(problems.map((p) => [p.code, p.offset, p.bytes])).toEqual([["TORN_TAIL", whole.length, 3]]);
  });

  it("readInfoLine reads a line that does not parse again before calling it damaged", async () => {
    let reads = 0;
    const lines = ["garbage", "garbage", "q;1;"];
    const got = await readInfoLine(
      async () => text.encode(lines[reads++]!),
      (t) => (t.endsWith(";") ? t : undefined),
    );
    expect(got).toEqual({ value: "q;1;", damaged: false });
    reads = 0;
    const bad = await readInfoLine(
      async () => (reads++, text.encode("garbage")),
      () => undefined,
    );
    expect(bad).toEqual({ value: undefined, damaged: true });
    expect(reads).toBe(3);
    expect(
      await readInfoLine(
        async () => undefined,
        () => "x",
      ),
    ).toEqual({ value: undefined, damaged: false });
  });
});
