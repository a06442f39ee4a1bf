// @ts-check
/**
 * The queues page (`#/`): every queue the user may see, from `GET ./api/v1/overview`, in one
 * table rendered as an HTML string (a thousand rows with their sparklines in a few ms), sorted
 * and filtered in the page.
 */
import { produceDialog } from "./actions.js";
import { withHistory } from "./api.js";
import { sparkline } from "./charts.js";
import { card, esc, h, queueHref, replace } from "./dom.js";
import { bytes, count, rate } from "./format.js";

/** @typedef {import("../protocol/api").OverviewResponse} OverviewResponse */
/** @typedef {import("../protocol/api").QueueOverviewJSON} QueueOverviewJSON */

/** @type {{ key: keyof QueueOverviewJSON, label: string, num?: boolean, wide?: boolean }[]} */
const COLUMNS = [
  { key: "name", label: "Queue" },
  { key: "messages", label: "Messages", num: true },
  // The lag next to the messages (seen first on a phone); the rates next to their sparkline.
  { key: "maxLag", label: "Worst lag", num: true },
  // `wide`: left out on phones.
  { key: "bytes", label: "Size", num: true, wide: true },
  { key: "parts", label: "Parts", num: true, wide: true },
  { key: "produceRate", label: "Produce/s", num: true },
  { key: "consumeRate", label: "Consume/s", num: true },
];

/** Rows shown until "Show all" is pressed. */
const ROW_LIMIT = 200;

/** @param {{ refreshSoon: () => void }} app */
export function queuesView(app) {
  // Rows rendered: a thousand rows with sparklines take ~200 ms to lay out on every poll; a person reads the first ones (sorted, filtered).
  const state = {
    key: /** @type {keyof QueueOverviewJSON} */ ("name"),
    dir: 1,
    filter: "",
    limit: ROW_LIMIT,
    data: /** @type {OverviewResponse | null} */ (null),
  };
  const cards = h("div", { class: "cards" });
  const filter = /** @type {HTMLInputElement} */ (
    h("input", { type: "search", id: "queue-filter", placeholder: "Filter by name", autocomplete: "off", "aria-label": "Filter queues by name" })
  );
  const shown = h("span", { class: "muted", id: "queue-count" });
  const tools = h("div", { class: "tools" });
  const head = h("tr");
  const body = h("tbody", { id: "queue-rows" });
  const table = h("table", { class: "grid queues", "aria-label": "Queues" }, h("thead", {}, head), body);
  const el = h(
    "section",
    { class: "view" },
    h("div", { class: "view-head" }, h("h1", {}, "Queues"), tools),
    cards,
    h("div", { class: "toolbar" }, filter, shown),
    h("div", { class: "table-wrap" }, table),
  );

  filter.addEventListener("input", () => {
    state.filter = filter.value.trim().toLowerCase();
    render();
  });
  const headers = () => {
    replace(
      head,
      ...COLUMNS.map((c) => {
        const sorted = state.key === c.key;
        const th = h(
          "th",
          { class: `${c.num ? "num" : ""}${c.wide ? " wide" : ""}`, "aria-sort": sorted ? (state.dir > 0 ? "ascending" : "descending") : "none", scope: "col" },
          h(
            "button",
            { type: "button", class: "sort", "data-key": c.key },
            c.label,
            h("span", { class: "arrow", "aria-hidden": "true" }, sorted ? (state.dir > 0 ? "▲" : "▼") : ""),
          ),
        );
        return th;
      }),
      h(
        "th",
        { scope: "col", class: "spark-col" },
        h("span", { class: "legend" }, h("i", { class: "dot produce" }), "in ", h("i", { class: "dot consume" }), "out"),
      ),
    );
  };
  body.addEventListener("click", (event) => {
    if (!(/** @type {HTMLElement} */ (event.target).closest("button[data-more]"))) return;
    state.limit = Infinity;
    render();
  });
  head.addEventListener("click", (event) => {
    const button = /** @type {HTMLElement} */ (event.target).closest("button[data-key]");
    if (!button) return;
    const key = /** @type {keyof QueueOverviewJSON} */ (button.getAttribute("data-key"));
    state.dir = state.key === key ? -state.dir : key === "name" ? 1 : -1;
    state.key = key;
    headers();
    render();
  });
  headers();

  function render() {
    const data = state.data;
    if (!data) return;
    const { key, dir } = state;
    const rows = data.queues.filter((q) => !state.filter || q.name.toLowerCase().includes(state.filter));
    rows.sort((a, b) => {
      const x = a[key];
      const y = b[key];
      const order = typeof x === "string" ? x.localeCompare(/** @type {string} */ (y)) : /** @type {number} */ (x) - /** @type {number} */ (y);
      return order * dir || a.name.localeCompare(b.name);
    });
    // The first answers after a server's start name the queues it has not read yet.
    const pending = data.pending?.length ? `, reading ${count(data.pending.length)} more` : "";
    shown.textContent =
      (state.filter ? `${count(rows.length)} of ${count(data.queues.length)}` : `${count(rows.length)} ${rows.length === 1 ? "queue" : "queues"}`) + pending;
    if (data.queues.length === 0 && pending) {
      body.innerHTML = `<tr><td colspan="${COLUMNS.length + 1}" class="empty">Reading ${count(data.pending.length)} queues…</td></tr>`;
      return;
    }
    if (data.queues.length === 0) {
      body.innerHTML = `<tr><td colspan="${COLUMNS.length + 1}" class="empty">No queues yet.${data.rights.includes("write") ? " Produce a message to create one." : ""}</td></tr>`;
      return;
    }
    if (rows.length === 0) {
      body.innerHTML = `<tr><td colspan="${COLUMNS.length + 1}" class="empty">No queue matches “${esc(state.filter)}”.</td></tr>`;
      return;
    }
    let html = "";
    for (const q of rows.slice(0, state.limit)) {
      const lagBy = q.maxLag > 0 && q.maxLagConsumer ? `<small class="muted">${esc(q.maxLagConsumer)}</small>` : "";
      // A partitioned queue: one row, its numbers summed over its partitions.
      const partitions = q.partitions ? ` <span class="badge">${count(q.partitions)} partitions</span>` : "";
      html +=
        // Without read (write only), its page would answer 403: the name is not a link.
        `<tr><th scope="row">${q.rights.includes("read") ? `<a href="${esc(queueHref(q.name))}">${esc(q.name)}</a>` : esc(q.name)}${partitions}</th>` +
        `<td class="num">${count(q.messages)}</td><td class="num${q.maxLag > 0 ? " lag" : ""}">${count(q.maxLag)}${lagBy}</td>` +
        `<td class="num wide">${bytes(q.bytes)}</td><td class="num wide">${count(q.parts)}</td>` +
        `<td class="num">${rate(q.produceRate)}</td><td class="num">${rate(q.consumeRate)}</td>` +
        `<td class="spark-col">${sparkline(q.history)}</td></tr>`;
    }
    if (rows.length > state.limit) {
      html += `<tr><td colspan="${COLUMNS.length + 1}" class="more"><button type="button" class="button" data-more>Show all ${count(rows.length)} queues</button> <span class="muted">(the first ${count(state.limit)} in this order are shown; filter or sort to find others)</span></td></tr>`;
    }
    body.innerHTML = html;
  }

  /** @param {OverviewResponse} data */
  function summary(data) {
    const total = (/** @type {"messages" | "bytes" | "produceRate" | "consumeRate"} */ key) => data.queues.reduce((sum, q) => sum + q[key], 0);
    replace(
      cards,
      card("Queues", count(data.queues.length)),
      card("Messages", count(total("messages"))),
      card("On disk", bytes(total("bytes"))),
      card("Produced /s", rate(total("produceRate")), "produce"),
      card("Consumed /s", rate(total("consumeRate")), "consume"),
    );
    if (data.rights.includes("write") && !tools.firstChild) {
      tools.append(
        h(
          "button",
          { type: "button", class: "button primary", "data-action": "produce", onclick: () => produceDialog(null, app.refreshSoon) },
          "Produce a test message",
        ),
      );
    }
  }

  return {
    el,
    crumbs: [],
    live: true,
    /** @param {AbortSignal} signal */
    async refresh(signal) {
      /** @type {OverviewResponse} */
      const data = await withHistory("./api/v1/overview", 60, signal);
      state.data = data;
      summary(data);
      const started = performance.now();
      render();
      // Layout included: what a poll costs the page (read by the 1,000-queue test).
      void body.offsetHeight;
      el.dataset.renderMs = (performance.now() - started).toFixed(1);
      return data;
    },
    destroy() {},
  };
}
