/**
 * `stat --watch`: a sample every interval until Ctrl-C. On a terminal, one table redrawn in
 * place (cursor hidden while it runs, shown again at the end); into a pipe or a file, one block
 * per sample (a timestamp line, the table, a blank line) with no escape code, so that it can be
 * logged or grepped; with `--json`, one JSON line per sample (a `WatchView`).
 */
import { describeError } from "./_errors";
import { sleep } from "../../src/core/sleep";
import { log } from "./_shared";
import type { WatchConsumerRow, WatchQueueRow, WatchSource, WatchView } from "./_watch-source";

export interface WatchOptions {
  intervalMs: number;
  json: boolean;
  /** What is watched, for the terminal's title line: a URL or a storage. */
  label: string;
  queue: string | undefined;
}

const ESC = "\u001b[";
const HIDE_CURSOR = `${ESC}?25l`;
const SHOW_CURSOR = `${ESC}?25h`;

/** Runs the watch until SIGINT/SIGTERM or a closed pipe; the first sample's error ends it (later ones are told and retried). */
export async function runWatch(source: WatchSource, o: WatchOptions): Promise<void> {
  const out = process.stdout;
  const tty = out.isTTY === true && !o.json;
  const stop = new AbortController();
  const onSignal = () => stop.abort();
  const onError = (error: NodeJS.ErrnoException) => {
    if (error.code !== "EPIPE") throw error;
    stop.abort(); // `| head`: the reader is gone
  };
  process.once("SIGINT", onSignal).once("SIGTERM", onSignal);
  out.on("error", onError);
  if (tty) out.write(`${HIDE_CURSOR}${ESC}2J`);
  let samples = 0;
  try {
    for (let next = Date.now(); !stop.signal.aborted;) {
      const view = await source.sample(stop.signal).catch((error: unknown) => {
        if (stop.signal.aborted) return undefined;
        if (samples === 0) throw error;
        log.warn(`Sampling failed: ${describeError(error) ?? String(error)}`);
        return undefined;
      });
      if (view) {
        samples++;
        if (o.json) out.write(`${JSON.stringify(view)}\n`);
        else if (tty) out.write(redraw([title(o, view), "", ...table(view, o.queue)], out.columns || 80, out.rows || 24));
        else out.write(`${new Date(view.at).toISOString()}\n${table(view, o.queue).join("\n")}\n\n`);
      }
      // On the beat (a slow sample does not push the next ones), never two at once.
      next = Math.max(next + o.intervalMs, Date.now());
      await sleep(next - Date.now(), stop.signal);
    }
  } finally {
    process.off("SIGINT", onSignal).off("SIGTERM", onSignal);
    if (tty) out.write(SHOW_CURSOR);
    await source.close();
  }
}

/** The frame: from the top left, each line cleared to its end, and what the last frame left below it cleared. */
function redraw(lines: string[], width: number, height: number): string {
  let shown = lines;
  // A table taller than the terminal would scroll, and the next frame would not land in place.
  if (lines.length > height - 1)
    shown = [...lines.slice(0, Math.max(1, height - 2)), `… ${lines.length - (height - 2)} more lines (a larger terminal, or one queue: stat <queue> --watch)`];
  return `${ESC}H${shown.map((line) => `${line.slice(0, width)}${ESC}K`).join("\n")}\n${ESC}J`;
}

function title(o: WatchOptions, view: WatchView): string {
  return `v-queue stat --watch ${o.label}${o.queue === undefined ? "" : ` ${o.queue}`}: every ${o.intervalMs / 1000}s, ${new Date(view.at).toLocaleTimeString("en-GB")} (Ctrl-C to stop)`;
}

/** The queues' table, and with a queue its consumers'. */
function table(view: WatchView, queue: string | undefined): string[] {
  if (queue !== undefined && view.queues.length === 0) return [`Queue "${queue}" does not exist (yet).`];
  if (view.queues.length === 0) return ["No queues."];
  const lines = columns(
    ["QUEUE", "MESSAGES", "BYTES", "PARTS", "PRODUCE/S", "CONSUME/S", "WORST LAG", "CONSUMER"],
    view.queues.map((q: WatchQueueRow) => [
      q.name,
      count(q.messages),
      bytes(q.bytes),
      count(q.parts),
      rate(q.produceRate),
      rate(q.consumeRate),
      q.maxLagConsumer === null ? "-" : count(q.maxLag),
      q.maxLagConsumer ?? "-",
    ]),
  );
  if (view.consumers === undefined) return lines;
  if (view.consumers.length === 0) return [...lines, "", "No consumers."];
  return [
    ...lines,
    "",
    ...columns(
      ["CONSUMER", "KIND", "POSITION", "LAG", "RATE/S", "IN FLIGHT"],
      view.consumers.map((c: WatchConsumerRow) => [
        c.name,
        c.kind,
        `part ${c.part} @ ${c.position}`,
        count(c.lag),
        rate(c.rate),
        c.inFlight === null ? "-" : count(c.inFlight),
      ]),
    ),
  ];
}

/** Aligned columns: the first (a name) and text to the left, numbers to the right. */
function columns(head: string[], rows: string[][]): string[] {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const left = (i: number) => i === 0 || head[i] === "CONSUMER" || head[i] === "KIND" || head[i] === "POSITION";
  const line = (cells: string[]) =>
    cells
      .map((cell, i) => (left(i) ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!)))
      .join("  ")
      .trimEnd();
  return [line(head), ...rows.map(line)];
}

const count = (n: number): string => n.toLocaleString("en");

/** `0`, `3.5`, `1,204`: one decimal below 10/s. */
const rate = (n: number): string => (n === 0 ? "0" : n < 10 ? n.toFixed(1) : Math.round(n).toLocaleString("en"));

const UNITS = ["B", "KiB", "MiB", "GiB", "TiB"];
function bytes(n: number): string {
  let value = n;
  let unit = 0;
  while (value >= 1024 && unit < UNITS.length - 1) {
    value /= 1024;
    unit++;
  }
  return unit === 0 ? `${n} B` : `${value.toFixed(1)} ${UNITS[unit]}`;
}
