// @ts-check
/**
 * A dead letter, as a shared consumer writes it to its dead-letter queue (one JSON text record:
 * the original body with where it came from, its deliveries, the last error and when), read
 * back so that the browser shows its parts rather than the JSON text holding them.
 */
import { h, queueHref } from "./dom.js";
import { count, dateTime } from "./format.js";

/** @typedef {import("../protocol/api").MessageJSON} MessageJSON */
/**
 * @typedef {{
 *   origin: { queue: string, consumer: string, part: number, seq: number },
 *   deliveries: number,
 *   error?: string,
 *   type: "string" | "object",
 *   data: string,
 *   at: number,
 * }} DeadLetter
 */

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/**
 * The dead letter `m` holds, or undefined when it holds none (a message pushed to a DLQ by
 * hand, or any other queue's message).
 * @param {MessageJSON} m
 * @returns {DeadLetter | undefined}
 */
export function deadLetterIn(m) {
  if (m.encoding === "base64" || !m.data.startsWith("{")) return undefined;
  let letter;
  try {
    letter = JSON.parse(m.data);
  } catch {
    return undefined;
  }
  const origin = letter?.origin;
  const valid =
    letter?.deadLetter === 1 &&
    typeof letter.data === "string" &&
    (letter.type === "string" || (letter.type === "object" && BASE64.test(letter.data))) &&
    Number.isFinite(letter.at) &&
    Number.isFinite(letter.deliveries) &&
    typeof origin?.queue === "string" &&
    typeof origin.consumer === "string";
  return valid ? letter : undefined;
}

/**
 * Where the letter came from, how often it was delivered, when it was given up on and why.
 * @param {DeadLetter} letter
 */
export function letterDetails(letter) {
  const { origin } = letter;
  const at = new Date(letter.at).toISOString();
  return h(
    "dl",
    { class: "letter" },
    h("dt", {}, "From"),
    h("dd", {}, h("a", { href: queueHref(origin.queue) }, origin.queue), ` · consumer ${origin.consumer} · part ${origin.part} · #${origin.seq}`),
    h("dt", {}, "Delivered"),
    h("dd", {}, `${count(letter.deliveries)} ${letter.deliveries === 1 ? "time" : "times"}`),
    h("dt", {}, "Dead-lettered"),
    h("dd", {}, h("time", { datetime: at, title: at }, dateTime(letter.at))),
    typeof letter.error === "string" && h("dt", {}, "Last error"),
    typeof letter.error === "string" && h("dd", { class: "error" }, letter.error),
  );
}
