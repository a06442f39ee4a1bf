// @ts-check
/**
 * The message browser (`#/queues/<name>/browse`): pages of messages read with
 * `GET ./api/v1/queues/<q>/browse`, which moves no consumer, from the oldest, the newest, a
 * cursor, a part and seq, or a time.
 */
import { call, queuePath } from "./api.js";
import { field } from "./dialog.js";
import { h, replace } from "./dom.js";
import { count } from "./format.js";
import { messageCard } from "./message.js";
import { positionPicker } from "./position-picker.js";

/** @typedef {import("../protocol/api").BrowseResponse} BrowseResponse */

/**
 * @param {{ refreshSoon: () => void, problem: (error: unknown) => void }} app
 * @param {string} name
 */
export function browseView(app, name) {
  const from = positionPicker({
    name: "from",
    id: "browse-from",
    labels: ["Oldest message", "Newest messages", "After a cursor", "Part and seq", "Date and time"],
    timeLabel: "Time",
    inputClass: "short",
  });
  const limit = /** @type {HTMLSelectElement} */ (
    h("select", { name: "limit" }, ...[10, 20, 50, 100].map((n) => h("option", { value: n, selected: n === 20 }, String(n))))
  );
  // A partitioned queue: every partition in turn, or one (its part and seq need one); filled once the queue's info says so.
  const partition = /** @type {HTMLSelectElement} */ (h("select", { name: "partition" }));
  const partitionField = field("Partition", partition);
  partitionField.hidden = true;
  const form = /** @type {HTMLFormElement} */ (
    h(
      "form",
      { class: "browse-form", "aria-label": "Where to start" },
      partitionField,
      field("Start at", from.select),
      ...from.fields,
      field("Per page", limit),
      h("button", { type: "submit", class: "button primary" }, "Show"),
    )
  );
  const list = h("div", { class: "messages", "aria-live": "polite" });
  const more = h("div", { class: "pager" });
  const el = h(
    "section",
    { class: "view" },
    h("div", { class: "view-head" }, h("h1", {}, `Messages of ${name}`)),
    h("p", { class: "muted" }, "Reading here moves no consumer."),
    form,
    list,
    more,
  );
  /** @type {AbortController | undefined} */
  let loading;

  /** @type {number | undefined} the queue's partition count, once read */
  let partitions;

  /** Reads whether the queue is partitioned (once): its partitions are then offered. */
  async function readPartitions() {
    if (partitions !== undefined) return;
    /** @type {import("../protocol/api").QueueInfoResponse} */
    const info = await call("GET", queuePath(name));
    partitions = info.partitions ?? 0;
    if (partitions === 0) return;
    partition.replaceChildren(
      h("option", { value: "" }, "Every partition in turn"),
      ...Array.from({ length: partitions }, (_, k) => h("option", { value: String(k) }, `Partition ${k}`)),
    );
    partitionField.hidden = false;
  }

  /** The chosen partition's query: one partition alone, or none (every one in turn). */
  const partitionQuery = () => new URLSearchParams(partition.value === "" ? [] : [["partition", partition.value]]);

  /** The query of the first page, from the form. */
  const firstQuery = () => {
    const choice = from.value();
    const q = partitionQuery();
    if (choice.kind === "earliest" || choice.kind === "latest") q.set("from", choice.kind);
    else if (choice.kind === "cursor") q.set("from", choice.cursor);
    else if (choice.kind === "seq") {
      q.set("part", choice.part);
      q.set("seq", choice.seq);
    } else if (choice.time) q.set("time", choice.time.toISOString());
    return q;
  };

  /**
   * @param {URLSearchParams} query
   * @param {boolean} append the next page, under the ones shown
   */
  async function load(query, append) {
    loading?.abort();
    const controller = (loading = new AbortController());
    query.set("limit", limit.value);
    /** @type {BrowseResponse} */
    const page = await call("GET", queuePath(name, `/browse?${query}`), { signal: controller.signal });
    if (!append) list.replaceChildren();
    if (page.messages.length === 0 && !append) list.append(h("p", { class: "empty" }, "No messages here."));
    for (const m of page.messages) list.append(messageCard(m));
    const next = page.next;
    // The next page of the partition this one read (whatever the form says now).
    const only = query.get("partition");
    replace(
      more,
      h("span", { class: "muted" }, `${count(list.querySelectorAll(".message").length)} shown`),
      next
        ? h(
            "button",
            {
              type: "button",
              class: "button",
              "data-action": "next",
              onclick: () => shown(load(new URLSearchParams({ from: next, ...(only === null ? {} : { partition: only }) }), true)),
            },
            "Next page",
          )
        : h("span", { class: "muted" }, "End of the queue."),
    );
  }

  /** A load started by the user: its failure goes to the banner. */
  const shown = (/** @type {Promise<void>} */ loaded) => void loaded.catch(app.problem);

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    shown(load(firstQuery(), false));
  });

  return {
    el,
    crumbs: [{ label: name, href: `#/queues/${encodeURIComponent(name)}` }, { label: "Messages" }],
    live: false,
    async refresh() {
      await readPartitions();
      await load(firstQuery(), false);
      return null;
    },
    destroy() {
      loading?.abort();
    },
  };
}
