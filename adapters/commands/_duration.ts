import { CliError } from "./_errors";

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/**
 * A duration flag (`--lease 30s`, `--wait 500ms`, `--delay 5m`, `1h`) in ms. The unit is
 * required (a bare `30` could be seconds or ms), except for `0`; at most `max` ms.
 */
export function parseDuration(flag: string, text: string, max = 2 ** 31 - 1): number {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m|h)$/.exec(text.trim());
  const ms = text.trim() === "0" ? 0 : match ? Math.round(Number(match[1]) * UNITS[match[2]!]!) : Number.NaN;
  if (!(ms >= 0 && ms <= max))
    throw new CliError(
      `Invalid ${flag} ${JSON.stringify(text)}: use a duration with its unit, such as 500ms, 30s, 5m or 1h (at most ${Math.floor(max / 1000)}s).`,
    );
  return ms;
}

/** A whole-number flag such as `--max` (`min` to `max`, written in digits). */
export function parseCount(flag: string, text: string, max = 1_000_000, min = 1): number {
  const n = /^\d{1,16}$/.test(text) ? Number(text) : NaN;
  if (!Number.isInteger(n) || n < min || n > max) throw new CliError(`Invalid ${flag} ${JSON.stringify(text)}: use an integer from ${min} to ${max}.`);
  return n;
}
