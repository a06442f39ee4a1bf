/**
 * A schedule's timing (writer/schedules.ts): checked as set (`E_OPTION` saying what is allowed), and its
 * ticks, by cron pattern (croner, in a time zone) or every N ms from when it was set.
 */
import { Cron } from "croner";
import { VQueueError } from "../core/errors";
import { NAME_RULE, isValidQueueName } from "../core/names";
import { normalizeMessage, type EncodedInput, type MessageInput } from "../format/message";

/** The shortest period: a schedule is no busy loop. */
export const MIN_EVERY_MS = 100;
/** The longest period: a year. */
export const MAX_EVERY_MS = 365 * 24 * 3600 * 1000;

/** A schedule as set: exactly one of `cron` and `everyMs`. */
export interface ScheduleInput {
  /** A cron pattern of 5 fields (minutes) or 6 (seconds first), read in `tz`. */
  cron?: string;
  /** The IANA time zone `cron` is read in (`Europe/Paris`). @default "UTC" */
  tz?: string;
  /** Fires every this many ms (from when the schedule was first set). */
  everyMs?: number;
  /** What each firing produces (as `push` takes it). @default `{ schedule, tick, at }`, the firing's tick */
  message?: MessageInput;
}

/** What the ticks of a schedule hang on. */
export interface Timing {
  everyMs?: number;
  /** When it was set with this timing: `everyMs` counts from here. */
  since: number;
  /** The cron pattern, parsed. */
  pattern?: Cron;
}

/** A cron pattern parsed in its time zone (one checked before). */
export const parseCron = (cron: string, tz: string | undefined): Cron => new Cron(cron, { timezone: tz, paused: true });

/** The checked schedule (`E_OPTION` saying what is allowed), its pattern parsed. */
export function checkSchedule(
  name: unknown,
  input: ScheduleInput,
): { name: string; cron?: string; tz?: string; everyMs?: number; message?: EncodedInput; pattern?: Cron } {
  if (!isValidQueueName(name)) throw new VQueueError("E_NAME", `Invalid schedule name ${JSON.stringify(name)}: use ${NAME_RULE}.`);
  if (typeof input !== "object" || input === null) throw new VQueueError("E_OPTION", `Invalid schedule: give { cron } or { everyMs }, and maybe a message.`);
  const { cron, tz, everyMs, message } = input;
  if ((cron === undefined) === (everyMs === undefined)) throw new VQueueError("E_OPTION", `Schedule "${name}": give exactly one of cron and everyMs.`);
  const encoded = message === undefined ? undefined : normalizeMessage(message);
  if (everyMs !== undefined) {
    if (!Number.isInteger(everyMs) || everyMs < MIN_EVERY_MS || everyMs > MAX_EVERY_MS)
      throw new VQueueError("E_OPTION", `Invalid everyMs ${JSON.stringify(everyMs)}: use an integer from ${MIN_EVERY_MS} to ${MAX_EVERY_MS} (a year).`);
    if (tz !== undefined) throw new VQueueError("E_OPTION", `Schedule "${name}": tz goes with cron, not with everyMs.`);
    return { name, everyMs, message: encoded };
  }
  if (typeof cron !== "string" || cron.trim() === "" || cron.length > 256)
    throw new VQueueError("E_OPTION", `Invalid cron ${JSON.stringify(cron)}: use a pattern of 5 or 6 fields ("*/5 * * * *").`);
  const zone = tz ?? "UTC";
  if (typeof zone !== "string" || !isTimeZone(zone))
    throw new VQueueError("E_OPTION", `Invalid tz ${JSON.stringify(tz)}: use an IANA time zone ("UTC", "Europe/Paris", "America/New_York").`);
  let pattern: Cron;
  try {
    pattern = parseCron(cron, zone);
  } catch (error) {
    throw new VQueueError("E_OPTION", `Invalid cron ${JSON.stringify(cron)}: ${(error as Error).message.replace(/^CronPattern: /, "")}`);
  }
  if (!pattern.nextRun()) throw new VQueueError("E_OPTION", `Invalid cron ${JSON.stringify(cron)}: it never fires.`);
  return { name, cron, tz: zone, message: encoded, pattern };
}

function isTimeZone(zone: string): boolean {
  try {
    new Intl.DateTimeFormat("en", { timeZone: zone });
    return true;
  } catch {
    return false;
  }
}

/** The first tick of `s` after `after`; undefined when there is none. */
export function nextTick(s: Timing, after: number): number | undefined {
  if (s.everyMs !== undefined) return s.since + (Math.floor((after - s.since) / s.everyMs) + 1) * s.everyMs;
  return s.pattern!.nextRun(new Date(after))?.getTime();
}

/** The latest tick of `s` at or before `now` and after `after`, if any. */
export function latestTick(s: Timing, after: number, now: number): number | undefined {
  if (s.everyMs !== undefined) {
    const tick = s.since + Math.floor((now - s.since) / s.everyMs) * s.everyMs;
    return tick > after ? tick : undefined;
  }
  // croner looks back from its reference, strictly before it: one ms past now counts a tick at now.
  const tick = s.pattern!.previousRuns(1, new Date(now + 1))[0]?.getTime();
  return tick !== undefined && tick > after ? tick : undefined;
}
