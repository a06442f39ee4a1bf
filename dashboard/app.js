// @ts-check
/**
 * The dashboard's entry: hash routes (`#/`, `#/queues/<name>`, `#/queues/<name>/browse`),
 * polling of the live pages (every sample interval, at least 2 s; stopped while the tab is
 * hidden), and the banner where every failure is told (never the console).
 */
import { ApiProblem, isAbort } from "./api.js";
import { browseView } from "./browse.js";
import { h, replace } from "./dom.js";
import { when } from "./format.js";
import { queueView } from "./queue.js";
import { queuesView } from "./queues.js";

/** @typedef {{ el: HTMLElement, crumbs: { label: string, href?: string }[], live: boolean, refresh: (signal: AbortSignal) => Promise<any>, destroy: () => void }} View */

const main = /** @type {HTMLElement} */ (document.getElementById("main"));
const crumbs = /** @type {HTMLElement} */ (document.getElementById("crumbs"));
const status = /** @type {HTMLElement} */ (document.getElementById("status"));
const banner = /** @type {HTMLElement} */ (document.getElementById("banner"));

const MIN_INTERVAL_MS = 2000;
let intervalMs = MIN_INTERVAL_MS;
/** @type {{ view: View, controller: AbortController } | undefined} */
let current;
/** @type {ReturnType<typeof setTimeout> | undefined} */
let timer;
let running = false;

const app = {
  /** Polls again at once (after an action). */
  refreshSoon: () => void tick(),
  /** Shows a failure in the banner (cancelled requests are not failures). */
  problem: (/** @type {unknown} */ error) => {
    if (isAbort(error)) return;
    banner.hidden = false;
    banner.textContent = error instanceof ApiProblem || error instanceof Error ? error.message : String(error);
    banner.dataset.status = error instanceof ApiProblem ? String(error.status) : "";
  },
};

/** @returns {View} */
function route() {
  const [path = ""] = location.hash.replace(/^#/, "").split("?");
  const parts = path.split("/").filter(Boolean);
  let name;
  try {
    name = decodeURIComponent(parts[1] ?? "");
  } catch {
    name = "";
  }
  if (parts[0] === "queues" && name) return parts[2] === "browse" ? browseView(app, name) : queueView(app, name);
  return queuesView(app);
}

function navigate() {
  current?.controller.abort();
  current?.view.destroy();
  banner.hidden = true;
  const view = route();
  current = { view, controller: new AbortController() };
  main.replaceChildren(view.el);
  replace(
    crumbs,
    h("a", { href: "#/" }, "Queues"),
    ...view.crumbs.flatMap((c) => [
      h("span", { class: "sep", "aria-hidden": "true" }, "/"),
      c.href ? h("a", { href: c.href }, c.label) : h("span", { "aria-current": "page" }, c.label),
    ]),
  );
  document.title = view.crumbs.length > 0 ? `${view.crumbs.map((c) => c.label).join(" · ")} · v-queue` : "Queues · v-queue";
  void tick();
}

/** One poll of the current view; the next is scheduled when it ends (live views only). */
async function tick() {
  clearTimeout(timer);
  if (!current || running) return;
  const { view, controller } = current;
  if (document.hidden) return showStatus("paused");
  running = true;
  try {
    const data = await view.refresh(controller.signal);
    if (controller.signal.aborted) return;
    banner.hidden = true;
    if (data?.sampleMs) intervalMs = Math.max(MIN_INTERVAL_MS, Math.min(10_000, data.sampleMs));
    showStatus(document.hidden ? "paused" : view.live ? "live" : "");
  } catch (error) {
    app.problem(error);
    showStatus(isAbort(error) ? "" : "error");
  } finally {
    running = false;
  }
  // The page changed while this poll ran: the new view's first poll waited for this one to end.
  if (current?.controller !== controller) return void tick();
  if (view.live && !document.hidden) timer = setTimeout(tick, intervalMs);
}

/** @param {"live" | "paused" | "error" | ""} state */
function showStatus(state) {
  status.dataset.state = state;
  status.textContent = state === "live" ? `Live · ${when(Date.now())}` : state === "paused" ? "Paused" : state === "error" ? "Retrying…" : "";
}

document.addEventListener("visibilitychange", () => {
  if (document.hidden) {
    clearTimeout(timer);
    showStatus("paused");
  } else void tick();
});
window.addEventListener("hashchange", navigate);
navigate();
