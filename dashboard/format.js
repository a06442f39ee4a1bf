// @ts-check
/** Numbers for people: counts, bytes, rates, ages. English formatting, so the page reads the same everywhere. */

const integer = new Intl.NumberFormat("en", { maximumFractionDigits: 0 });
const compact = new Intl.NumberFormat("en", { notation: "compact", maximumFractionDigits: 1 });

/** 1234567 -> "1,234,567" */
export function count(/** @type {number | null | undefined} */ n) {
  return n === null || n === undefined ? "–" : integer.format(n);
}

/** Bytes in binary units: "0 B", "12.3 KiB", "4.0 GiB". */
export function bytes(/** @type {number} */ n) {
  if (!Number.isFinite(n)) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
  let value = n;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(value < 10 ? 2 : value < 100 ? 1 : 0)} ${units[unit]}`;
}

/** Messages per second: "0", "0.4", "12", "3.2K". */
export function rate(/** @type {number} */ n) {
  if (!Number.isFinite(n) || n === 0) return "0";
  if (n < 10) return n.toFixed(1).replace(/\.0$/, "");
  return n < 1000 ? integer.format(n) : compact.format(n);
}

/** A duration in ms: "45 s", "3 min", "5 h 20 min", "12 d". */
export function duration(/** @type {number} */ ms) {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min`;
  const h = Math.floor(m / 60);
  if (h < 48) return m % 60 === 0 ? `${h} h` : `${h} h ${m % 60} min`;
  return `${Math.floor(h / 24)} d`;
}

/** How long ago `at` (ms since the epoch) was: "12 s ago", "never". */
export function ago(/** @type {number | null | undefined} */ at, now = Date.now()) {
  return at === null || at === undefined ? "never" : `${duration(now - at)} ago`;
}

/** A time of day, or a date and time when not today. */
export function when(/** @type {number} */ at) {
  const date = new Date(at);
  const today = new Date().toDateString() === date.toDateString();
  return today ? date.toLocaleTimeString() : date.toLocaleString();
}

const dateAndTime = new Intl.DateTimeFormat("en", { dateStyle: "medium", timeStyle: "medium" });

/** A date and time, in this browser's time zone: "Dec 6, 2026, 5:10:03 PM". */
export function dateTime(/** @type {number} */ at) {
  return dateAndTime.format(at);
}
