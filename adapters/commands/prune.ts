import { defineCommand } from "citty";
import type { PruneRequest, PruneResponse } from "../../protocol/api";
import { pruneResponse } from "../../runtime/routes/prune";
import { pruneQueue } from "../../src/retention/prune";
import { retains } from "../../src/options/retention";
import { apiClient, CliError, log, plural, targetArgs, withStorage } from "./_shared";

const DURATION: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const SIZE: Record<string, number> = { "": 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3, t: 1024 ** 4 };

export const prune = defineCommand({
  meta: {
    name: "prune",
    description:
      "Apply retention now: delete a queue's oldest whole parts (never the current one) past these limits; through --url, the server's own limits when none is given",
  },
  args: {
    queue: { type: "positional", required: true, description: "The queue" },
    "max-age": { type: "string", description: "Delete parts whose newest message is older: 7d, 12h, 30m, 90s or ms", valueHint: "age" },
    "max-bytes": { type: "string", description: "Keep at most this much: 10G, 500M, 64K or bytes", valueHint: "size" },
    "max-parts": { type: "string", description: "Keep at most this many parts (the current one counts)", valueHint: "n" },
    consumed: { type: "boolean", description: "Delete parts every consumer has committed past" },
    ...targetArgs,
  },
  async run({ args }) {
    const limits: PruneRequest = {};
    if (args["max-age"] !== undefined) limits.maxAgeMs = amount(args["max-age"], DURATION, "--max-age", "7d, 12h, 30m, 90s or a number of ms", "ms");
    if (args["max-bytes"] !== undefined) limits.maxBytes = amount(args["max-bytes"], SIZE, "--max-bytes", "10G, 500M, 64K or a number of bytes", "");
    if (args["max-parts"] !== undefined) limits.maxParts = amount(args["max-parts"], { "": 1 }, "--max-parts", "a positive integer", "");
    if (args.consumed) limits.deleteConsumed = true;
    let result: PruneResponse;
    if (args.url) result = await apiClient(args.url, args.user).prune(args.queue, retains(limits) ? limits : undefined);
    else {
      if (!retains(limits))
        throw new CliError("Give at least one limit: --max-age, --max-bytes, --max-parts or --consumed (on the files there is no configured retention).");
      result = pruneResponse(await withStorage(args, `Cannot prune "${args.queue}"`, (driver) => pruneQueue(driver, args.queue, limits)));
    }
    // A partitioned queue: each partition's own line (its parts are its own ids).
    const each = result.partitions?.map((p) => ({ ...p, name: `${args.queue}.p${p.partition}` })) ?? [{ ...result, name: args.queue }];
    for (const r of each) if (r.refused) log.warn(`Nothing deleted in "${r.name}": ${r.refused}.`);
    const deleted = each.filter((r) => r.parts.length > 0);
    if (deleted.length === 0 && !each.some((r) => r.refused)) log.info(`Nothing to delete in "${args.queue}".`);
    for (const r of deleted)
      log.success(
        `Deleted ${plural(r.parts.length, "part")} of "${r.name}" (${r.parts.join(", ")}): ${plural(r.messages, "message")}, ${plural(r.bytes, "byte")}.`,
      );
  },
});

/** `7d`, `10G`, or a plain integer, in the unit of `units[fallback]`. */
function amount(text: string, units: Record<string, number>, flag: string, allowed: string, fallback: string): number {
  const match = /^(\d+(?:\.\d+)?)\s*([a-z]*)$/i.exec(text.trim());
  const unit = match && (match[2]!.toLowerCase() || fallback);
  const factor = unit !== null && unit !== undefined ? units[unit] : undefined;
  const value = factor === undefined ? Number.NaN : Math.round(Number(match![1]) * factor);
  if (!Number.isSafeInteger(value) || value < 1) throw new CliError(`Invalid ${flag} ${JSON.stringify(text)}: use ${allowed}.`);
  return value;
}
