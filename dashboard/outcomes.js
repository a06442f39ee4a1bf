// @ts-check
/**
 * A shared consumer's outcomes, live, on its queue's page: the events of
 * `GET ./api/v1/queues/<q>/consumers/<c>/events` (server-sent events), newest first, the last
 * KEEP of them, filtered by kind. The browser's EventSource sends the page's Basic credentials
 * (same origin) and, when the connection drops, connects again after the last event it had
 * (Last-Event-ID): none twice, none missed that the server still keeps.
 */
import { apiURL, queuePath, seg } from "./api.js";
import { esc, h, replace } from "./dom.js";
import { count, dateTime, when } from "./format.js";

/** @typedef {import("../protocol/api").OutcomeEventJSON} OutcomeEventJSON */

const KINDS = ["completed", "failed", "dead", "progress"];
/** Events kept in the page (the newest): the server keeps many more. */
const KEEP = 200;
/** A result, progress or error longer than this is cut (all of it in the cell's title). */
const DETAIL_CHARS = 120;
/** Waits before connecting again after the server refused the stream (EventSource gives up then); the last one repeats. */
const RETRY_MS = [1000, 2000, 5000, 10_000];

/**
 * @param {string} queue
 * @param {() => void} onEvent called when an event comes (the page refreshes its counters)
 */
export function outcomesPanel(queue, onEvent) {
  const consumerSelect = /** @type {HTMLSelectElement} */ (h("select", { name: "outcomes-consumer", "aria-label": "Shared consumer" }));
  const kindSelect = /** @type {HTMLSelectElement} */ (
    h(
      "select",
      { name: "outcomes-kind", "aria-label": "Filter outcomes by kind" },
      h("option", { value: "" }, "Every kind"),
      ...KINDS.map((k) => h("option", { value: k }, k)),
    )
  );
  const state = h("span", { class: "stream-state", role: "status" });
  const shown = h("span", { class: "muted" });
  const rows = h("tbody");
  const el = h(
    "section",
    { class: "outcomes", hidden: true },
    h("h2", {}, "Outcomes ", shown),
    h("div", { class: "toolbar" }, consumerSelect, kindSelect, state),
    h(
      "div",
      { class: "table-wrap" },
      h(
        "table",
        { class: "grid", "aria-label": "Outcomes" },
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            ...["Time", "Kind", "Message", "Deliveries", "Result, progress or error"].map((label, i) =>
              h("th", { scope: "col", class: i === 3 ? "num wide" : "" }, label),
            ),
          ),
        ),
        rows,
      ),
    ),
  );

  /** @type {string[]} */
  let consumers = [];
  /** The consumer followed (none: the queue has no shared consumer). */
  /** @type {string | undefined} */
  let followed;
  /** @type {OutcomeEventJSON[]} oldest first */
  let events = [];
  /** @type {EventSource | undefined} */
  let source;
  /** Where the stream is: the last event's cursor (an SSE id). */
  /** @type {string | undefined} */
  let cursor;
  let refusals = 0;
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let retry;
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let drawing;

  consumerSelect.addEventListener("change", () => follow(consumerSelect.value));
  kindSelect.addEventListener("change", draw);
  // Closed while the tab is hidden (as the page's polls stop), resumed after the last event seen once it shows.
  const onVisibility = () => {
    if (document.hidden) {
      close();
      showState("paused");
    } else if (followed !== undefined && !source) connect(followed);
  };
  document.addEventListener("visibilitychange", onVisibility);

  /** Stops the stream, and follows `consumer` (none: the panel is hidden) from its oldest event kept. */
  function follow(/** @type {string | undefined} */ consumer) {
    close();
    followed = consumer;
    events = [];
    cursor = undefined;
    refusals = 0;
    consumerSelect.value = consumer ?? "";
    el.hidden = consumer === undefined;
    draw();
    if (consumer !== undefined) connect(consumer);
  }

  /** @param {string} consumer */
  function connect(consumer) {
    if (document.hidden) return showState("paused");
    // From the oldest event kept at first; once one was seen (a refusal, the tab shown again), after it.
    const query = cursor === undefined ? "from=oldest" : `after=${encodeURIComponent(cursor)}`;
    const stream = new EventSource(apiURL(queuePath(queue, `/consumers/${seg(consumer)}/events?${query}`)));
    source = stream;
    showState(refusals === 0 ? "connecting" : "reconnecting");
    stream.onopen = () => {
      refusals = 0;
      showState("live");
    };
    const take = (/** @type {MessageEvent} */ message) => {
      let event;
      try {
        event = /** @type {OutcomeEventJSON} */ (JSON.parse(message.data));
      } catch {
        return;
      }
      cursor = message.lastEventId || event.cursor;
      events.push(event);
      if (events.length > KEEP) events.shift();
      // A burst (every event kept, at first) is drawn once.
      drawing ??= setTimeout(draw, 50);
      onEvent();
    };
    for (const kind of KINDS) stream.addEventListener(kind, take);
    stream.onerror = () => {
      // CONNECTING: the browser connects again by itself (Last-Event-ID). CLOSED: the server
      // answered something else than a stream (an error, a proxy while it restarts): it gives up, this does not.
      if (stream.readyState !== EventSource.CLOSED) return showState("reconnecting");
      stream.close();
      const wait = RETRY_MS[Math.min(refusals++, RETRY_MS.length - 1)] ?? 10_000;
      showState("refused", wait);
      retry = setTimeout(() => {
        retry = undefined;
        connect(consumer);
      }, wait);
    };
  }

  function close() {
    clearTimeout(retry);
    retry = undefined;
    source?.close();
    source = undefined;
  }

  /**
   * @param {"connecting" | "live" | "reconnecting" | "refused" | "paused"} now
   * @param {number} [wait] refused: the wait before the next try
   */
  function showState(now, wait = 0) {
    state.dataset.state = now;
    state.textContent =
      now === "live"
        ? "Live"
        : now === "connecting"
          ? "Connecting…"
          : now === "paused"
            ? "Paused while the tab is hidden"
            : now === "reconnecting"
              ? "Connection lost: connecting again…"
              : `The server refused the stream: trying again in ${wait / 1000} s…`;
  }

  function draw() {
    clearTimeout(drawing);
    drawing = undefined;
    const kind = kindSelect.value;
    const list = kind ? events.filter((e) => e.kind === kind) : events;
    shown.textContent = kind ? `(${count(list.length)} of the last ${count(events.length)})` : `(the last ${count(events.length)})`;
    if (list.length === 0) {
      rows.innerHTML = `<tr><td colspan="5" class="empty">${events.length === 0 ? "No outcome yet: they appear here as workers acknowledge, fail or report progress." : `No ${esc(kind)} outcome among the last ${count(events.length)}.`}</td></tr>`;
      return;
    }
    let html = "";
    for (let i = list.length - 1; i >= 0; i--) html += row(/** @type {OutcomeEventJSON} */ (list[i]));
    rows.innerHTML = html;
  }

  return {
    el,
    /**
     * The queue's shared consumers now: the one followed stays, else the first is followed.
     * @param {string[]} names
     */
    update(names) {
      if (names.join("\n") !== consumers.join("\n")) {
        consumers = names;
        replace(consumerSelect, ...names.map((name) => h("option", { value: name }, name)));
      }
      if (followed !== undefined && names.includes(followed)) consumerSelect.value = followed;
      else if (followed !== names[0]) follow(names[0]);
    },
    /** Follows `consumer` and brings the panel into view. */
    show(/** @type {string} */ consumer) {
      if (consumer !== followed) follow(consumer);
      el.scrollIntoView({ block: "start", behavior: "smooth" });
    },
    destroy() {
      document.removeEventListener("visibilitychange", onVisibility);
      close();
      clearTimeout(drawing);
    },
  };
}

/**
 * One event as a table row (escaped HTML).
 * @param {OutcomeEventJSON} e
 */
function row(e) {
  const place = `${e.partition === undefined ? "" : `${e.partition}:`}${e.part}.${e.offset}`;
  const at = new Date(e.at).toISOString();
  return (
    `<tr data-kind="${esc(e.kind)}"><td><time datetime="${at}" title="${esc(dateTime(e.at))}">${esc(when(e.at))}</time></td>` +
    `<td><span class="badge ${esc(e.kind)}">${esc(e.kind)}</span></td>` +
    `<td class="place">${esc(place)}${e.seq === undefined ? "" : ` <span class="muted">#${esc(e.seq)}</span>`}</td>` +
    `<td class="num wide">${count(e.deliveries)}</td><td class="detail">${detail(e)}</td></tr>`
  );
}

/**
 * What the event says besides its message: the result or progress as JSON, the error (and when it comes again).
 * @param {OutcomeEventJSON} e
 */
function detail(e) {
  if (e.kind === "failed" || e.kind === "dead") {
    const retryAt = e.retryAt === undefined ? "" : ` <span class="muted">· again at ${esc(when(e.retryAt))}</span>`;
    return e.error === undefined ? `<span class="muted">no error given</span>${retryAt}` : `${cut(e.error, "error")}${retryAt}`;
  }
  const value = e.kind === "progress" ? e.progress : e.result;
  return value === undefined ? `<span class="muted">–</span>` : cut(JSON.stringify(value), "json");
}

/** `text` escaped, cut to DETAIL_CHARS (the whole of it in its title). */
function cut(/** @type {string} */ text, /** @type {string} */ cls) {
  const short = text.length > DETAIL_CHARS ? `${text.slice(0, DETAIL_CHARS)}…` : text;
  return `<code class="${cls}" title="${esc(text)}">${esc(short)}</code>`;
}
