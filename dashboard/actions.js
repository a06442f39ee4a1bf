// @ts-check
/** The actions a user may take (each offered only with the right for it), each confirmed in a dialog. */
import { call, queuePath, seg } from "./api.js";
import { field, openDialog } from "./dialog.js";
import { h } from "./dom.js";
import { count } from "./format.js";
import { positionPicker } from "./position-picker.js";

/**
 * Produces one test message: text, or JSON (stored as its JSON text).
 * @param {string | null} queue null: the dialog asks for the queue's name (it is created)
 * @param {() => void} done
 */
export function produceDialog(queue, done) {
  const name = /** @type {HTMLInputElement} */ (
    h("input", { name: "queue", required: true, pattern: "[A-Za-z0-9._\\-]{1,128}", value: queue ?? "", autocomplete: "off" })
  );
  const kind = /** @type {HTMLSelectElement} */ (h("select", { name: "kind" }, h("option", { value: "json" }, "JSON"), h("option", { value: "text" }, "Text")));
  const body = /** @type {HTMLTextAreaElement} */ (h("textarea", { name: "body", rows: 5, spellcheck: "false" }));
  body.value = JSON.stringify({ test: true, from: "v-queue dashboard", at: new Date().toISOString() }, null, 2);
  const number = (/** @type {string} */ field, /** @type {number} */ min, /** @type {number} */ max) =>
    /** @type {HTMLInputElement} */ (h("input", { name: field, type: "number", min, max, step: 1, inputmode: "numeric" }));
  const priority = number("priority", 0, 255);
  const maxDeliveries = number("maxDeliveries", 1, 1_000_000);
  const delayMs = number("delayMs", 0, 365 * 24 * 3600 * 1000);
  const backoffKind = /** @type {HTMLSelectElement} */ (
    h(
      "select",
      { name: "backoff" },
      h("option", { value: "" }, "The consumer's"),
      h("option", { value: "fixed" }, "Fixed"),
      h("option", { value: "exponential" }, "Exponential"),
    )
  );
  const backoffMs = number("backoffMs", 0, 24 * 3600 * 1000);
  const group = /** @type {HTMLInputElement} */ (h("input", { name: "group", maxlength: 255, pattern: "[\\x20-\\x7e]{1,255}", autocomplete: "off" }));
  const key = /** @type {HTMLInputElement} */ (h("input", { name: "key", maxlength: 255, pattern: "[\\x20-\\x7e]{1,255}", autocomplete: "off" }));
  openDialog({
    title: queue ? `Produce a test message to ${queue}` : "Produce a test message",
    body: [
      queue ? null : field("Queue", name, "Letters, digits, '.', '_' and '-'; created if it does not exist."),
      field("Format", kind),
      field("Message", body),
      h(
        "details",
        { class: "options" },
        h("summary", {}, "Options"),
        field("Priority", priority, "0 to 255: shared consumers lease higher ones first (empty: 0)."),
        field("Max deliveries", maxDeliveries, "Before the dead-letter queue (empty: the consumer's)."),
        field("Backoff", backoffKind, "The wait before a failed delivery comes again."),
        field("Backoff ms", backoffMs, "Fixed: each time; exponential: doubling from it."),
        field("Group", group, "Shared consumers lease a group's messages in order."),
        field("Delay ms", delayMs, "Delivered to no consumer before then."),
        field("Idempotency key", key, "Produced once within the server's key window."),
      ),
    ].filter((n) => n !== null),
    confirm: "Produce",
    run: async () => {
      const target = queue ?? name.value.trim();
      let message = body.value;
      if (kind.value === "json") {
        try {
          message = JSON.parse(body.value);
        } catch {
          throw new Error("The message is not valid JSON: fix it, or choose Text.");
        }
      }
      /** @type {Record<string, unknown>} */
      const options = {};
      if (priority.value !== "") options.priority = Number(priority.value);
      if (maxDeliveries.value !== "") options.maxDeliveries = Number(maxDeliveries.value);
      if (delayMs.value !== "") options.delayMs = Number(delayMs.value);
      if (group.value !== "") options.group = group.value;
      if (backoffKind.value !== "") options.backoff = { type: backoffKind.value, delayMs: Number(backoffMs.value || 0) };
      const headers = key.value === "" ? undefined : { "idempotency-key": key.value };
      const answer = await call("POST", queuePath(target, "/messages"), { body: { message, ...options }, headers });
      if (answer.delayed) return `Delayed in ${target} until ${answer.delayed.until}.`;
      return `Produced to ${target}: part ${answer.first.part}, seq ${answer.first.seq}.`;
    },
    done,
  });
}

/**
 * Moves an ordered consumer: to the oldest message, the end, a cursor, a part and seq, or a time.
 * @param {string} queue
 * @param {string} consumer
 * @param {() => void} done
 * @param {boolean} [partitioned] a partitioned queue: no part and seq (each partition has its own); a cursor names partitions
 */
export function seekDialog(queue, consumer, done, partitioned = false) {
  const to = positionPicker({
    name: "to",
    labels: [
      "The oldest message (rewind to the start)",
      "The end (skip everything)",
      partitioned ? "A cursor (the partitions it names)" : "A cursor",
      "A part and sequence number",
      "A date and time",
    ],
    timeLabel: "Time (this browser's time zone)",
    partitioned,
  });
  openDialog({
    title: `Move consumer ${consumer}`,
    body: [
      h("p", { class: "muted" }, `Consumer ${consumer} of ${queue} goes on from the chosen place; its position is saved.`),
      field("Move to", to.select),
      ...to.fields,
    ],
    confirm: "Move consumer",
    run: async () => {
      const choice = to.value();
      /** @type {unknown} */
      let target = choice.kind;
      if (choice.kind === "cursor") target = choice.cursor;
      if (choice.kind === "seq") target = { part: Number(choice.part), seq: Number(choice.seq) };
      if (choice.kind === "time") {
        if (!choice.time) throw new Error("Choose a date and time.");
        target = { time: choice.time.toISOString() };
      }
      const answer = await call("POST", queuePath(queue, `/consumers/${seg(consumer)}/seek`), { body: { to: target } });
      return `Consumer ${consumer} moved: it goes on after cursor ${answer.cursor}.`;
    },
    done,
  });
}

/**
 * @param {string} queue
 * @param {string} consumer
 * @param {() => void} done
 */
export function deleteConsumerDialog(queue, consumer, done) {
  openDialog({
    title: `Delete consumer ${consumer}?`,
    body: [h("p", {}, `Its saved position in ${queue} is removed; messages stay. A consumer of that name starting again begins where new consumers begin.`)],
    confirm: "Delete consumer",
    danger: true,
    run: async () => {
      await call("DELETE", queuePath(queue, `/consumers/${seg(consumer)}`));
      return `Consumer ${consumer} deleted.`;
    },
    done,
  });
}

/**
 * Moves dead letters back to the queue they came from (or another).
 * @param {string} dlq
 * @param {() => void} done
 */
export function redriveDialog(dlq, done) {
  const to = /** @type {HTMLInputElement} */ (h("input", { name: "to", placeholder: dlq.replace(/\.dead$/, ""), autocomplete: "off" }));
  const max = /** @type {HTMLInputElement} */ (h("input", { name: "max", type: "number", min: 1, max: 1000000, value: 1000 }));
  openDialog({
    title: `Re-drive dead letters of ${dlq}`,
    body: [field("To queue", to, "Empty: each goes back to the queue it came from."), field("At most", max)],
    confirm: "Re-drive",
    run: async () => {
      /** @type {{ max: number, to?: string }} */
      const body = { max: Number(max.value) };
      if (to.value.trim()) body.to = to.value.trim();
      const answer = await call("POST", queuePath(dlq, "/redrive"), { body });
      return `${count(answer.moved)} dead ${answer.moved === 1 ? "letter" : "letters"} moved back.`;
    },
    done,
  });
}

/**
 * @param {string} queue
 * @param {() => void} done
 */
export function purgeDialog(queue, done) {
  openDialog({
    title: `Purge ${queue}?`,
    body: [h("p", {}, `Every message of ${queue} is removed, for good. The queue and its consumers stay, at the new start.`)],
    confirm: "Purge all messages",
    danger: true,
    run: async () => {
      const answer = await call("POST", queuePath(queue, "/purge"));
      return `Purged: ${count(answer.messages)} messages removed.`;
    },
    done,
  });
}
