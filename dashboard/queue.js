// @ts-check
/**
 * A queue's page (`#/queues/<name>`): its stats, rate and lag charts over the last minutes,
 * its parts and consumers (both kinds), a shared consumer's outcomes as they happen, and the
 * actions the user's rights allow.
 */
import { deleteConsumerDialog, produceDialog, purgeDialog, redriveDialog, seekDialog } from "./actions.js";
import { call, queuePath, withHistory } from "./api.js";
import { timeChart } from "./charts.js";
import { card, esc, h, queueHref, replace } from "./dom.js";
import { ago, bytes, count, dateTime, duration, rate } from "./format.js";
import { outcomesPanel } from "./outcomes.js";

/** @typedef {import("../protocol/api").QueueDetailResponse} QueueDetailResponse */
/** @typedef {import("../protocol/api").ConsumerOverviewJSON} ConsumerOverviewJSON */
/** @typedef {import("../protocol/api").ScheduleJSON} ScheduleJSON */

/**
 * @param {{ refreshSoon: () => void }} app
 * @param {string} name
 */
export function queueView(app, name) {
  const actions = h("div", { class: "tools" });
  const dlq = h("p", { class: "dlq", hidden: true });
  const cards = h("div", { class: "cards" });
  const rateBox = h("div", { class: "chart" });
  const lagBox = h("div", { class: "chart" });
  const parts = h("tbody");
  const consumers = h("tbody");
  const consumersCount = h("span", { class: "muted" });
  const partsCount = h("span", { class: "muted" });
  // A partitioned queue has no parts of its own: its partitions instead, each linked to its page.
  const partitionRows = h("tbody");
  const partitionsCount = h("span", { class: "muted" });
  const partsSection = h(
    "div",
    {},
    h("h2", {}, "Parts ", partsCount),
    h(
      "div",
      { class: "table-wrap" },
      h(
        "table",
        { class: "grid", "aria-label": "Parts" },
        h("thead", {}, row("th", ["Part", "Size", "Messages", "Age", "Format", "Compression"], [1, 2, 3, 5])),
        parts,
      ),
    ),
  );
  const partitionsSection = h(
    "div",
    { hidden: true },
    h("h2", {}, "Partitions ", partitionsCount),
    h(
      "div",
      { class: "table-wrap" },
      h(
        "table",
        { class: "grid", "aria-label": "Partitions" },
        h("thead", {}, row("th", ["Partition", "Messages", "Size", "Parts", "Produced /s", "Consumed /s", "Worst lag"], [1, 2, 3, 4, 5, 6])),
        partitionRows,
      ),
    ),
  );
  // The counters come from the server's monitor, polled; an outcome brings the next poll forward
  // (at most one a second: a sample a second is what the monitor takes).
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let soon;
  const outcomes = outcomesPanel(name, () => {
    soon ??= setTimeout(() => {
      soon = undefined;
      app.refreshSoon();
    }, 1000);
  });
  // Its schedules (repeatable messages), shown when it has some.
  const scheduleRows = h("tbody");
  const schedulesCount = h("span", { class: "muted" });
  const schedulesSection = h(
    "div",
    { hidden: true },
    h("h2", {}, "Schedules ", schedulesCount),
    h(
      "div",
      { class: "table-wrap" },
      h(
        "table",
        { class: "grid", "aria-label": "Schedules" },
        h("thead", {}, row("th", ["Schedule", "When", "Message", "Last firing", "Next firing"], [])),
        scheduleRows,
      ),
    ),
  );
  const el = h(
    "section",
    { class: "view" },
    h("div", { class: "view-head" }, h("h1", {}, name), actions),
    dlq,
    cards,
    h(
      "div",
      { class: "charts" },
      h("figure", { class: "panel" }, h("figcaption", {}, "Messages per second"), rateBox),
      h("figure", { class: "panel" }, h("figcaption", {}, "Lag (worst consumer, messages)"), lagBox),
    ),
    h("h2", {}, "Consumers ", consumersCount),
    h(
      "div",
      { class: "table-wrap" },
      h(
        "table",
        { class: "grid", "aria-label": "Consumers" },
        h(
          "thead",
          {},
          row("th", ["Consumer", "Kind", "Position", "Lag", "Rate /s", "In flight", "Redelivered", "Dead-lettered", "Last seen", ""], [3, 4, 5, 6, 7]),
        ),
        consumers,
      ),
    ),
    outcomes.el,
    schedulesSection,
    partitionsSection,
    partsSection,
  );
  const rateChart = timeChart(
    rateBox,
    [
      { label: "produced", color: "--produce" },
      { label: "consumed", color: "--consume" },
    ],
    rate,
  );
  const lagChart = timeChart(lagBox, [{ label: "lag", color: "--lag", fill: true }], count, true);
  /** @type {string[]} */
  let rights = [];
  /** A partitioned queue (its consumers seek by partitioned cursors, never by part and seq). */
  let partitioned = false;

  consumers.addEventListener("click", (event) => {
    const button = /** @type {HTMLElement} */ (event.target).closest("button[data-action]");
    const consumer = button?.closest("tr")?.getAttribute("data-consumer");
    if (!button || !consumer) return;
    const action = button.getAttribute("data-action");
    if (action === "outcomes") outcomes.show(consumer);
    else if (action === "seek") seekDialog(name, consumer, app.refreshSoon, partitioned);
    else deleteConsumerDialog(name, consumer, app.refreshSoon);
  });

  /** @param {QueueDetailResponse} data */
  function render(data) {
    const q = data.queue;
    partitioned = Boolean(q.partitions);
    const lagBy = q.maxLagConsumer && q.maxLag > 0 ? ` (${q.maxLagConsumer})` : "";
    replace(
      cards,
      card("Messages", count(q.messages)),
      card("On disk", bytes(q.bytes)),
      card("Parts", count(q.parts)),
      // A partitioned queue: its numbers are summed over its partitions (each one's page: <queue>.p<k>).
      ...(q.partitions ? [card("Partitions", count(q.partitions))] : []),
      card("Consumers", count(q.consumers)),
      card("Produced /s", rate(q.produceRate), "produce"),
      card("Consumed /s", rate(q.consumeRate), "consume"),
      card(`Worst lag${lagBy}`, count(q.maxLag), q.maxLag > 0 ? "lag" : ""),
    );
    // A re-drive writes to the letters' origin queues: offered with the write right on some queue.
    const seen = [...q.rights, ...(data.rights.includes("write") ? ["write-some"] : [])];
    if (rights.join() !== seen.join()) {
      rights = seen;
      renderActions();
    }
    if (data.deadLetterQueue) {
      dlq.hidden = false;
      replace(dlq, "Dead letters of its shared consumers go to ", h("a", { href: queueHref(data.deadLetterQueue) }, data.deadLetterQueue), ".");
    } else if (data.deadLetterQueues?.length) {
      dlq.hidden = false;
      const links = data.deadLetterQueues.flatMap((dead, i) => [i > 0 ? ", " : "", h("a", { href: queueHref(dead) }, dead)]);
      replace(dlq, "Dead letters of its shared consumers go to each partition's own: ", ...links, ".");
    } else dlq.hidden = true;
    const history = q.history;
    if (history) {
      rateChart.update([history.t, history.produce ?? [], history.consume ?? []]);
      lagChart.update([history.t, history.lag ?? []]);
    }
    consumersCount.textContent = `(${data.consumers.length})`;
    partsCount.textContent = `(${data.parts.length})`;
    partsSection.hidden = partitioned;
    partitionsSection.hidden = !partitioned;
    if (data.partitions && q.partitions) {
      partitionsCount.textContent = `(${q.partitions})`;
      const rows = new Map(data.partitions.map((p) => [p.partition, p]));
      // Every partition, those never written too (empty: no page of their own yet).
      partitionRows.innerHTML = Array.from({ length: q.partitions }, (_, k) => {
        const p = rows.get(k);
        if (!p)
          return `<tr><th scope="row">${k}</th><td class="num">0</td><td class="num">–</td><td class="num">0</td><td class="num">–</td><td class="num">–</td><td class="num">0</td></tr>`;
        return (
          `<tr><th scope="row"><a href="${esc(queueHref(p.name))}">${k}</a></th><td class="num">${count(p.messages)}</td><td class="num">${bytes(p.bytes)}</td><td class="num">${count(p.parts)}</td>` +
          `<td class="num">${rate(p.produceRate)}</td><td class="num">${rate(p.consumeRate)}</td><td class="num${p.maxLag > 0 ? " lag" : ""}">${count(p.maxLag)}</td></tr>`
        );
      }).join("");
    }
    const now = Date.now();
    const canSeek = q.rights.includes("read");
    const canDelete = q.rights.includes("admin");
    consumers.innerHTML =
      data.consumers.length === 0
        ? `<tr><td colspan="10" class="empty">No consumers yet.</td></tr>`
        : data.consumers
            .map((c) => {
              const shared = c.kind === "shared";
              const buttons =
                (shared ? `<button type="button" class="button small" data-action="outcomes">Outcomes</button>` : "") +
                (canSeek && !shared ? `<button type="button" class="button small" data-action="seek">Seek…</button>` : "") +
                (canDelete ? `<button type="button" class="button small danger-text" data-action="delete">Delete…</button>` : "");
              return (
                `<tr data-consumer="${esc(c.name)}"><th scope="row">${esc(c.name)}</th><td><span class="badge ${c.kind}">${c.kind}</span></td>` +
                `<td title="cursor ${esc(c.cursor)}">${partitioned ? "every partition" : `part ${c.part} · #${count(c.count)}`}</td><td class="num${c.lag > 0 ? " lag" : ""}">${count(c.lag)}<small class="muted">${bytes(c.lagBytes)}</small></td>` +
                `<td class="num">${rate(c.rate)}</td><td class="num">${shared ? count(c.inFlight ?? 0) : "–"}</td><td class="num">${shared ? count(c.redelivered ?? 0) : "–"}</td>` +
                `<td class="num">${shared ? count(c.deadLettered ?? 0) : "–"}</td><td>${c.lastSeen === null ? "–" : ago(c.lastSeen, now)}</td><td class="row-actions">${buttons}</td></tr>`
              );
            })
            .join("");
    outcomes.update(data.consumers.filter((c) => c.kind === "shared").map((c) => c.name));
    parts.innerHTML = data.parts
      .map(
        (p) =>
          `<tr><th scope="row">${p.id}${p.id === data.parts.at(-1)?.id ? ' <span class="badge">current</span>' : ""}</th><td class="num">${bytes(p.bytes)}</td><td class="num">${count(p.messages)}</td>` +
          `<td class="num">${p.createdAt === null ? "–" : duration(now - p.createdAt)}</td><td>${p.format ?? "–"}</td><td class="num">${p.compressionRatio === null ? "–" : `${p.compressionRatio.toFixed(1)}×`}</td></tr>`,
      )
      .join("");
  }

  /** @param {ScheduleJSON[]} list */
  function renderSchedules(list) {
    schedulesSection.hidden = list.length === 0;
    schedulesCount.textContent = `(${list.length})`;
    scheduleRows.innerHTML = list
      .map(
        (s) =>
          `<tr data-schedule="${esc(s.name)}"><th scope="row">${esc(s.name)}</th>` +
          `<td>${s.cron === undefined ? `every ${duration(s.everyMs ?? 0)}` : `<code>${esc(s.cron)}</code> ${esc(s.tz ?? "UTC")}`}</td>` +
          `<td>${s.message === undefined ? '<span class="muted">{schedule, tick, at}</span>' : s.encoding ? '<span class="muted">bytes</span>' : esc(s.message.length > 80 ? `${s.message.slice(0, 80)}…` : s.message)}</td>` +
          `<td>${s.lastFiredAtMs === undefined ? "never" : esc(dateTime(s.lastFiredAtMs))}</td><td>${s.nextAtMs === undefined ? "–" : esc(dateTime(s.nextAtMs))}</td></tr>`,
      )
      .join("");
  }

  function renderActions() {
    const can = (/** @type {string} */ right) => rights.includes(right);
    replace(
      actions,
      can("read") ? h("a", { class: "button", href: queueHref(name, "browse"), "data-action": "browse" }, "Browse messages") : null,
      can("write")
        ? h(
            "button",
            { type: "button", class: "button primary", "data-action": "produce", onclick: () => produceDialog(name, app.refreshSoon) },
            "Produce test message",
          )
        : null,
      can("read") && can("write-some") && name.endsWith(".dead")
        ? h(
            "button",
            { type: "button", class: "button", "data-action": "redrive", onclick: () => redriveDialog(name, app.refreshSoon) },
            "Re-drive dead letters",
          )
        : null,
      can("admin")
        ? h("button", { type: "button", class: "button danger", "data-action": "purge", onclick: () => purgeDialog(name, app.refreshSoon) }, "Purge…")
        : null,
    );
  }

  return {
    el,
    crumbs: [{ label: name }],
    live: true,
    /** @param {AbortSignal} signal */
    async refresh(signal) {
      /** @type {[QueueDetailResponse, ScheduleJSON[]]} */
      const [data, schedules] = await Promise.all([
        withHistory(queuePath(name, "/overview"), 300, signal),
        // A partitioned queue has none, and a user may not read them: the section stays hidden.
        call("GET", queuePath(name, "/schedules"), { signal }).then(
          (/** @type {{ schedules: ScheduleJSON[] }} */ answer) => answer.schedules,
          () => [],
        ),
      ]);
      render(data);
      renderSchedules(schedules);
      return data;
    },
    destroy() {
      clearTimeout(soon);
      outcomes.destroy();
      rateChart.destroy();
      lagChart.destroy();
    },
  };
}

/**
 * A table row of header cells; `numeric` are the indexes of right-aligned ones.
 * @param {"th"} tag
 * @param {string[]} labels
 * @param {number[]} numeric
 */
function row(tag, labels, numeric) {
  return h("tr", {}, ...labels.map((label, i) => h(tag, { scope: "col", class: numeric.includes(i) ? "num" : "" }, label)));
}
