/**
 * Where to go in a queue, as the seek dialog and the message browser both ask it: a choice of
 * the oldest message, the end, a cursor, a part and sequence number, or a date and time, with
 * the inputs the choice needs (the others hidden).
 */
import { field } from "./dialog.js";
import { h } from "./dom.js";

const KINDS = ["earliest", "latest", "cursor", "seq", "time"];

/**
 * @param {{ name: string, id?: string, labels: string[], timeLabel: string, inputClass?: string, partitioned?: boolean }} options
 *   `labels`: the choices' texts, in the order of KINDS; `partitioned`: a partitioned queue's
 *   consumer, whose cursors name partitions and which has no part and seq of its own
 */
export function positionPicker({ name, id, labels, timeLabel, inputClass, partitioned = false }) {
  const kinds = partitioned ? KINDS.filter((kind) => kind !== "seq") : KINDS;
  const select = /** @type {HTMLSelectElement} */ (
    h("select", { name, id }, ...kinds.map((kind) => h("option", { value: kind }, labels[KINDS.indexOf(kind)] ?? kind)))
  );
  const cursor = /** @type {HTMLInputElement} */ (
    h("input", { name: "cursor", placeholder: partitioned ? "p0:part.position.count,p1:..." : "part.position.count", autocomplete: "off" })
  );
  const part = /** @type {HTMLInputElement} */ (h("input", { name: "part", type: "number", min: 0, value: 0, class: inputClass }));
  const seq = /** @type {HTMLInputElement} */ (h("input", { name: "seq", type: "number", min: 1, value: 1, class: inputClass }));
  const time = /** @type {HTMLInputElement} */ (h("input", { name: "time", type: "datetime-local", step: 1 }));
  const extra = {
    cursor: field("Cursor", cursor),
    seq: h("div", { class: "field-row" }, field("Part", part), field("Seq", seq)),
    time: field(timeLabel, time),
  };
  const show = () => {
    for (const [kind, node] of Object.entries(extra)) node.hidden = kind !== select.value;
  };
  select.addEventListener("change", show);
  show();
  return {
    select,
    /** The inputs, to place after the choice. */
    fields: [extra.cursor, extra.seq, extra.time],
    /** The choice and what it needs: `time` undefined when none (or no valid one) is chosen. */
    value() {
      const at = time.value ? new Date(time.value) : undefined;
      return { kind: select.value, cursor: cursor.value.trim(), part: part.value, seq: seq.value, time: at && !Number.isNaN(at.getTime()) ? at : undefined };
    },
  };
}
