import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { GENERATED, dashboardWeight, generatedSource } from "../../scripts/build-dashboard";

describe("dashboard assets", () => {
  it("runtime/dashboard/assets.generated.ts is what `npm run dashboard` makes from dashboard/ now", () => {
    const committed = readFileSync(GENERATED, "utf8");
    // On failure: run `npm run dashboard` and commit the file.
    expect(committed === generatedSource(), "runtime/dashboard/assets.generated.ts is stale: run `npm run dashboard`").toBe(true);
  });

  it("weighs what docs/operating.md says, within a few KiB", () => {
    const { raw, gzip } = dashboardWeight();
    const page = readFileSync(new URL("../../docs/operating.md", import.meta.url), "utf8");
    const said = /dashboard page weighs ([\d.]+) KiB \(([\d.]+) KiB gzipped\)/.exec(page);
    expect(said, "docs/operating.md states the dashboard's weight").not.toBeNull();
    expect(Math.abs(Number(said![1]) - raw / 1024)).toBeLessThan(8);
    expect(Math.abs(Number(said![2]) - gzip / 1024)).toBeLessThan(4);
  });
});
