import { describe, expect, it } from "vitest";
import { HistoryRing } from "../../runtime/history";

describe("HistoryRing (the monitor's charts)", () => {
  it("keeps the last `capacity` samples in order, oldest first, however many came (across its growth and its wraps)", () => {
    for (const capacity of [2, 7, 8, 9, 20, 300]) {
      const ring = new HistoryRing(capacity, ["rate", "lag"]);
      for (let n = 1; n <= 2 * capacity + 3; n++) {
        ring.push(n * 1000, { rate: n / 2, lag: n });
        const kept = Array.from({ length: Math.min(n, capacity) }, (_, k) => n - Math.min(n, capacity) + 1 + k);
        expect(ring.read(capacity + 5)).toEqual({ t: kept, rate: kept.map((v) => v / 2), lag: kept });
        expect(ring.read(3).lag).toEqual(kept.slice(-3));
        const last = kept.slice(-5);
        expect(ring.mean("lag", 5)).toBeCloseTo(last.reduce((a, b) => a + b, 0) / last.length);
      }
    }
  });
});
