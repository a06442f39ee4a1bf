/**
 * Issue 40's feature rows of the shared-consumer bench: each drains the same messages as the plain
 * row it mirrors, in the same interleaved rounds, with one feature on (priorities, groups, a rate
 * limit never reached). Their cost is the ratio to that plain row of the same run; BullMQ's rows
 * are measured beside, informative.
 */
import type { Drain } from "./shared-baselines";
import { formatRate, formatTable } from "./util";

export interface Scenario {
  key: string;
  label: string;
  drain?: Drain;
  skipped?: string;
  seconds: number[];
}

/** The VQ_BENCH_SHARED_PARTS name that adds a feature's rows (to each of inproc, http, bullmq picked). */
export type Feature = "priority" | "groups" | "limiter" | "outcomes";

/**
 * Each feature row: the plain row it mirrors, and its feature. `without`: the row is the plain
 * row with a default feature turned off (outcomes are kept by default), so the feature's cost is
 * plain / this row.
 */
export const MIRRORS: Record<string, { plain: string; feature: Feature; without?: true }> = {
  "inproc-no-outcomes": { plain: "inproc", feature: "outcomes", without: true },
  "http-no-outcomes": { plain: "http", feature: "outcomes", without: true },
  "inproc-prio": { plain: "inproc", feature: "priority" },
  "inproc-groups": { plain: "inproc", feature: "groups" },
  "inproc-limited": { plain: "inproc-nosync", feature: "limiter" },
  "http-prio": { plain: "http", feature: "priority" },
  "http-groups": { plain: "http", feature: "groups" },
  "http-limited": { plain: "http", feature: "limiter" },
  "bullmq-prio": { plain: "bullmq", feature: "priority" },
  "bullmq-limited": { plain: "bullmq", feature: "limiter" },
};

/** v-queue's feature rows against BullMQ's with the same feature. */
const AGAINST_BULLMQ = [
  ["inproc-prio", "bullmq-prio"],
  ["http-prio", "bullmq-prio"],
  ["inproc-limited", "bullmq-limited"],
  ["http-limited", "bullmq-limited"],
] as const;

/** BullMQ's rows are baselines: their cost is informative, no target. */
export function isBaseline(key: string): boolean {
  return key.startsWith("bullmq") || key === "streams";
}

/**
 * Each feature row against the plain row it mirrors (the ratio of medians, and of each round, as
 * they ran side by side), with what shows the feature was at work; then v-queue's against BullMQ's.
 */
export function printFeatureCost(scenarios: Scenario[], rate: (s: Scenario) => number, target: number): void {
  const get = (key: string) => scenarios.find((s) => s.key === key)!;
  const ran = (s: Scenario) => s.seconds.length > 0;
  const perRound = (s: Scenario, base: Scenario) =>
    s.seconds.map((t, i) => (base.seconds[i] === undefined ? "-" : (base.seconds[i]! / t).toFixed(2))).join(", ");
  const percent = (shares: number[]) => shares.map((x) => `${(x * 100).toFixed(0)} %`).join(", ");
  const check = (s: Scenario) =>
    s.drain?.early ? `p > 0 in first tenth: ${percent(s.drain.early)}` : s.drain?.outOfOrder ? `out of group order: ${s.drain.outOfOrder.join(", ")}` : "";
  const rows = scenarios
    .filter((s) => MIRRORS[s.key] && ran(s) && ran(get(MIRRORS[s.key]!.plain)))
    .map((row) => {
      const mirror = MIRRORS[row.key]!;
      // Without a default feature: the plain row is the one with it.
      const [s, plain] = mirror.without ? [get(mirror.plain), row] : [row, get(mirror.plain)];
      const ratio = rate(s) / rate(plain);
      const informative = isBaseline(s.key);
      return [
        `${s.key} / ${plain.key}`,
        formatRate(rate(plain)),
        formatRate(rate(s)),
        `${ratio.toFixed(2)}x`,
        perRound(s, plain),
        check(row),
        informative ? "informative" : `>= ${target}x`,
        informative ? "" : ratio >= target ? "PASS" : "FAIL",
      ];
    });
  for (const [key, bullmqKey] of AGAINST_BULLMQ) {
    const s = get(key);
    const bullmq = get(bullmqKey);
    if (!ran(s) || !ran(bullmq)) continue;
    rows.push([
      `${key} / ${bullmqKey}`,
      formatRate(rate(bullmq)),
      formatRate(rate(s)),
      `${(rate(s) / rate(bullmq)).toFixed(2)}x`,
      perRound(s, bullmq),
      "",
      "informative",
      "",
    ]);
  }
  if (rows.length === 0) return;
  console.log(`\n### Features (issue 40): with the feature / without, same run\n`);
  console.log(formatTable(["rows", "baseline msgs/s", "with the feature msgs/s", "ratio (medians)", "ratio per round", "check", "target", "result"], rows));
  console.log(
    `\nPriorities: 10 % of the messages have a priority (1..9); without priorities the first tenth would hold about 10 % of them.` +
      `\nGroups: each message in one of the groups, the same number each, at shuffled places; none may go out before an earlier one of its group.` +
      `\nOutcomes: kept by default (a completed event per ack); their cost is the plain row against the same with outcomes: false.`,
  );
}
