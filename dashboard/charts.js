// @ts-check
/**
 * Charts: a sparkline is one SVG path string (cheap enough for a thousand table rows); the
 * queue page's charts are uPlot (bundled, loaded before this module as the global `uPlot`).
 */

/**
 * The `d` of an SVG polyline over `values`, scaled to `width` x `height` against `max`.
 * @param {number[] | undefined} values
 * @param {number} width
 * @param {number} height
 * @param {number} max
 */
export function sparkPath(values, width, height, max) {
  if (!values || values.length < 2) return "";
  const step = width / (values.length - 1);
  const scale = max > 0 ? (height - 2) / max : 0;
  let d = "";
  for (let i = 0; i < values.length; i++) {
    const v = values[i] ?? 0;
    d += `${i === 0 ? "M" : "L"}${(i * step).toFixed(1)} ${(height - 1 - v * scale).toFixed(1)}`;
  }
  return d;
}

/**
 * The inline SVG of a queue's produce and consume rates over its history (escaped-safe: numbers only).
 * @param {{ produce?: number[], consume?: number[] } | undefined} history
 */
export function sparkline(history, width = 96, height = 24) {
  const produce = history?.produce ?? [];
  const consume = history?.consume ?? [];
  const max = Math.max(0, ...produce, ...consume);
  return `<svg class="spark" viewBox="0 0 ${width} ${height}" width="${width}" height="${height}" aria-hidden="true"><path class="spark-consume" d="${sparkPath(consume, width, height, max)}"/><path class="spark-produce" d="${sparkPath(produce, width, height, max)}"/></svg>`;
}

/** A time axis tick (seconds since the epoch) as the time of day. */
function clock(/** @type {number} */ seconds) {
  return new Date(seconds * 1000).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });
}

/** A CSS custom property of the page (the theme's colours), for uPlot which draws on a canvas. */
function cssVar(/** @type {string} */ name) {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
}

/** Tick steps of the time axis, in seconds. */
const TIME_STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400];

/** Tick steps of an axis of whole numbers. */
const WHOLE_STEPS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1e3, 2e3, 5e3, 1e4, 2e4, 5e4, 1e5, 2e5, 5e5, 1e6, 2e6, 5e6, 1e7, 1e8, 1e9];

/** A y axis tick: as many decimals as the step needs (0.25, not 0.3), large ones compact. */
function tick(/** @type {number} */ v) {
  return Math.abs(v) >= 10_000 ? new Intl.NumberFormat("en", { notation: "compact", maximumFractionDigits: 1 }).format(v) : String(Number(v.toFixed(2)));
}

/**
 * A uPlot time series chart in `container`, resized with it.
 * @param {HTMLElement} container
 * @param {{ label: string, color: string, fill?: boolean }[]} series colours are CSS custom property names
 * @param {(value: number) => string} format the legend's values
 * @param {boolean} [whole] values are counts: the y axis ticks on whole numbers
 */
export function timeChart(container, series, format, whole = false) {
  const uPlot = /** @type {any} */ (globalThis).uPlot;
  if (!uPlot) {
    container.textContent = "Charts could not be loaded.";
    return { update() {}, destroy() {} };
  }
  const grid = cssVar("--border");
  const text = cssVar("--muted");
  const axis = { stroke: text, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 }, font: "11px system-ui, sans-serif" };
  /** @type {any} */
  let plot;
  const make = (/** @type {number[][]} */ data) => {
    const width = Math.max(200, container.clientWidth);
    plot = new uPlot(
      {
        width,
        height: 200,
        cursor: { drag: { x: false, y: false } },
        legend: { live: true },
        scales: {
          // One sample (a queue just seen) is no range: the minute before it.
          x: {
            time: true,
            range: (/** @type {unknown} */ _u, /** @type {number} */ min, /** @type {number} */ max) => (max - min < 1 ? [max - 60, max] : [min, max]),
          },
          y: { range: (/** @type {unknown} */ _u, /** @type {number} */ _min, /** @type {number} */ max) => [0, max > 0 ? max * 1.1 : 1] },
        },
        axes: [
          // Whole seconds: the samples are a second or more apart.
          { ...axis, space: 70, incrs: TIME_STEPS, values: (/** @type {unknown} */ _u, /** @type {number[]} */ ticks) => ticks.map(clock) },
          // Counts tick on whole numbers only.
          { ...axis, size: 56, incrs: whole ? WHOLE_STEPS : undefined, values: (/** @type {unknown} */ _u, /** @type {number[]} */ ticks) => ticks.map(tick) },
        ],
        series: [
          { label: "time", value: (/** @type {unknown} */ _u, /** @type {number | null} */ t) => (t === null || t === undefined ? "–" : clock(t)) },
          ...series.map((s) => {
            const color = cssVar(s.color);
            return {
              label: s.label,
              stroke: color,
              width: 2,
              fill: s.fill ? `${color}22` : undefined,
              points: { show: false },
              value: (/** @type {unknown} */ _u, /** @type {number | null} */ v) => (v === null || v === undefined ? "–" : format(v)),
            };
          }),
        ],
      },
      data,
      container,
    );
  };
  const resize = new ResizeObserver(() => plot?.setSize({ width: Math.max(200, container.clientWidth), height: 200 }));
  resize.observe(container);
  return {
    /** @param {number[][]} data columns: t (seconds), then each series */
    update(data) {
      if (plot) plot.setData(data);
      else make(data);
    },
    destroy() {
      resize.disconnect();
      plot?.destroy();
    },
  };
}
