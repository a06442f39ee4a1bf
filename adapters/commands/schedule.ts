import { defineCommand } from "citty";
import type { ScheduleJSON, ScheduleRequest } from "../../protocol/api";
import { scheduleJSON } from "../../runtime/routes/schedules";
import { readPartitions } from "../../src/partitions/declaration";
import { PartitionedWriter, readQueueSchedules } from "../../src/writer/partitioned";
import type { ScheduleInput } from "../../src/writer/schedules";
import { openQueue, type QueueWriter } from "../../src/writer/writer";
import { parseDuration } from "./_duration";
import { apiClient, CliError, log, targetArgs, withStorage } from "./_shared";

const ACTIONS = ["set", "list", "rm"];
/** The longest --every: a year (the engine's bound). */
const MAX_EVERY_MS = 365 * 24 * 3600 * 1000;

export const schedule = defineCommand({
  meta: {
    name: "schedule",
    description:
      "Repeatable messages: `schedule set <queue> <name> --cron ... | --every ...`, `schedule list <queue>`, `schedule rm <queue> <name>`. Fired exactly once per tick by the holder of the queue's writer (a server, or the next writer opened)",
  },
  args: {
    action: { type: "positional", required: true, description: "set, list or rm" },
    queue: { type: "positional", required: true, description: "The queue (an ordinary one is created if missing)" },
    name: { type: "positional", required: false, description: "The schedule (set, rm)" },
    cron: { type: "string", description: 'A cron pattern: 5 fields (minute first) or 6 (second first), such as "0 3 * * *"', valueHint: "pattern" },
    tz: { type: "string", description: "The IANA time zone --cron is read in [default: UTC]", valueHint: "zone" },
    every: { type: "string", description: "Fire every this long instead: 500ms, 30s, 5m, 1h", valueHint: "time" },
    message: { type: "string", description: "The text each firing produces [default: the firing's {schedule, tick, at}]", valueHint: "text" },
    json: { type: "boolean", description: "list: print JSON" },
    ...targetArgs,
  },
  async run({ args }) {
    const { action, queue } = args;
    if (!ACTIONS.includes(action)) throw new CliError(`Unknown action ${JSON.stringify(action)}: use set, list or rm.`);
    const name = args.name as string | undefined;
    if (action !== "list" && !name) throw new CliError(`Give the schedule's name: v-queue schedule ${action} ${queue} <name>.`);
    if (action === "set") {
      if ((args.cron === undefined) === (args.every === undefined)) throw new CliError("Give exactly one of --cron and --every.");
      const request: ScheduleRequest & ScheduleInput = {
        ...(args.cron !== undefined
          ? { cron: args.cron, ...(args.tz !== undefined ? { tz: args.tz } : {}) }
          : { everyMs: parseDuration("--every", args.every!, MAX_EVERY_MS) }),
        ...(args.message !== undefined ? { message: args.message } : {}),
      };
      const set = args.url
        ? await apiClient(args.url, args.user).schedule(queue, name!, request)
        : await withWriter(args, queue, async (writer) => {
            const result = await writer.schedule(name!, request);
            return { created: result.created, schedule: scheduleJSON(result.schedule) };
          });
      log.success(`${set.created ? "Created" : "Updated"} schedule "${name}" of "${queue}": ${describe(set.schedule)}.`);
      return;
    }
    if (action === "rm") {
      const removed = args.url
        ? await apiClient(args.url, args.user).unschedule(queue, name!)
        : await withWriter(args, queue, (writer) => writer.unschedule(name!));
      if (!removed) throw new CliError(`Queue "${queue}" has no schedule "${name}".`);
      log.success(`Removed schedule "${name}" of "${queue}".`);
      return;
    }
    const list = args.url
      ? (await apiClient(args.url, args.user).schedules(queue)).schedules
      : (await withStorage(args, `Cannot read the schedules of "${queue}"`, (driver) => readQueueSchedules(driver, queue))).map(scheduleJSON);
    if (args.json) {
      console.log(JSON.stringify(list, null, 2));
      return;
    }
    if (list.length === 0) log.info(`Queue "${queue}" has no schedules.`);
    for (const s of list) console.log(`${s.name}\t${describe(s)}`);
  },
});

/**
 * The queue's writer (a partitioned queue's, which takes partition 0's), opened on the files for
 * one call (refused while a server holds it: go through --url then).
 */
function withWriter<T>(
  args: { dir?: string; storage?: string },
  queue: string,
  run: (writer: Pick<QueueWriter, "schedule" | "unschedule">) => Promise<T>,
): Promise<T> {
  return withStorage(args, `Cannot change the schedules of "${queue}"`, async (driver) => {
    const writer = (await readPartitions(driver, queue)) === undefined ? await openQueue(queue, { driver }) : await PartitionedWriter.open(queue, { driver });
    try {
      return await run(writer);
    } finally {
      await writer.close();
    }
  });
}

/** `cron "0 3 * * *" in Europe/Paris, last 2026-01-01T02:00:00.000Z, next ...` */
function describe(s: ScheduleJSON): string {
  const timing = s.cron !== undefined ? `cron "${s.cron}" in ${s.tz}` : `every ${s.everyMs} ms`;
  return [timing, s.lastFiredAt ? `last ${s.lastFiredAt}` : "never fired", s.nextAt ? `next ${s.nextAt}` : "no next tick"].join(", ");
}
