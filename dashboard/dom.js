// @ts-check
/** Tiny DOM helpers: the page builds its nodes with these, and big tables as escaped HTML strings. */

/**
 * An element with attributes (`on*` functions become listeners, `false`/null are left out) and children.
 * @param {string} tag
 * @param {Record<string, unknown> | null} [attrs]
 * @param {...(Node | string | number | null | undefined | false)} children
 * @returns {HTMLElement}
 */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs ?? {})) {
    if (value === false || value === null || value === undefined) continue;
    if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2), /** @type {EventListener} */ (value));
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

/**
 * @param {HTMLElement} el
 * @param {(Node | string | number | null | undefined | false)[]} children
 */
export function append(el, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    el.append(typeof child === "number" ? String(child) : child);
  }
}

/** Text made safe for innerHTML (element content and quoted attributes). */
export function esc(/** @type {unknown} */ text) {
  return String(text).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** Replaces an element's children. */
export function replace(/** @type {HTMLElement} */ el, /** @type {(Node | string | null | undefined | false)[]} */ ...children) {
  el.replaceChildren();
  append(el, children);
}

/** The hash link of a queue page (`#/queues/<name>`), or of one of its sub-pages. */
export function queueHref(/** @type {string} */ name, sub = "") {
  return `#/queues/${encodeURIComponent(name)}${sub ? `/${sub}` : ""}`;
}

/** A stat card: a label over a big value. */
export function card(/** @type {string} */ label, /** @type {string} */ value, cls = "") {
  return h("div", { class: `card ${cls}` }, h("span", { class: "card-label" }, label), h("strong", { class: "card-value" }, value));
}
