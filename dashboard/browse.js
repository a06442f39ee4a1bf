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

/** @typedef {import("../protocol/api").BrowseResponse} BrowseResponse */

/**
 * @param {{ refreshSoon: () => void, problem: (error: unknown) => void }} app
 * @param {string} name
 */
export function browseView(app, name) {
  const from = /** @type {HTMLSelectElement} */ (
    h(
      "select",
      { name: "from", id: "browse-from" },
      h("option", { value: "earliest" }, "Oldest message"),
      h("option", { value: "latest" }, "Newest messages"),
      h("option", { value: "cursor" }, "After a cursor"),
      h("option", { value: "seq" }, "Part and seq"),
      h("option", { value: "time" }, "Date and time"),
    )
  );
  const cursor = /** @type {HTMLInputElement} */ (h("input", { name: "cursor", placeholder: "part.position.count", autocomplete: "off" }));
  const part = /** @type {HTMLInputElement} */ (h("input", { name: "part", type: "number", min: 0, value: 0, class: "short" }));
  const seq = /** @type {HTMLInputElement} */ (h("input", { name: "seq", type: "number", min: 1, value: 1, class: "short" }));
  const time = /** @type {HTMLInputElement} */ (h("input", { name: "time", type: "datetime-local", step: 1 }));
  const limit = /** @type {HTMLSelectElement} */ (h("select", { name: "limit" }, ...[10, 20, 50, 100].map((n) => h("option", { value: n, selected: n === 20 }, String(n)))));
  const extra = { cursor: field("Cursor", cursor), seq: h("div", { class: "field-row" }, field("Part", part), field("Seq", seq)), time: field("Time", time) };
  const form = /** @type {HTMLFormElement} */ (h("form", { class: "browse-form", "aria-label": "Where to start" }, field("Start at", from), extra.cursor, extra.seq, extra.time, field("Per page", limit), h("button", { type: "submit", class: "button primary" }, "Show")));
  const list = h("div", { class: "messages", "aria-live": "polite" });
  const more = h("div", { class: "pager" });
  const el = h("section", { class: "view" }, h("div", { class: "view-head" }, h("h1", {}, `Messages of ${name}`)), h("p", { class: "muted" }, "Reading here moves no consumer."), form, list, more);
  const show = () => {
    for (const [key, node] of Object.entries(extra)) node.hidden = key !== from.value;
  };
  from.addEventListener("change", show);
  show();
  /** @type {AbortController | undefined} */
  let loading;

  /** The query of the first page, from the form. */
  const firstQuery = () => {
    const q = new URLSearchParams();
    if (from.value === "earliest" || from.value === "latest") q.set("from", from.value);
    else if (from.value === "cursor") q.set("from", cursor.value.trim());
    else if (from.value === "seq") {
      q.set("part", part.value);
      q.set("seq", seq.value);
    }
    else if (time.value) q.set("time", new Date(time.value).toISOString());
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
    replace(
      more,
      h("span", { class: "muted" }, `${count(list.querySelectorAll(".message").length)} shown`),
      next ? h("button", { type: "button", class: "button", "data-action": "next", onclick: () => shown(load(new URLSearchParams({ from: next }), true)) }, "Next page") : h("span", { class: "muted" }, "End of the queue."),
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
      await load(firstQuery(), false);
      return null;
    },
    destroy() {
      loading?.abort();
    },
  };
}
