// @ts-check
/**
 * Every action goes through a modal `<dialog>`: it says what will happen, takes the action's
 * inputs, runs it on confirm and shows the result or the error in place (a page test drives
 * it as a person would; `window.confirm` could not be styled nor tested).
 */
import { h } from "./dom.js";

let ids = 0;

/**
 * @param {{
 *   title: string,
 *   body?: (Node | string)[],
 *   confirm: string,
 *   danger?: boolean,
 *   run: (form: HTMLFormElement) => Promise<string>,
 *   done?: () => void,
 * }} options `run` returns the text shown on success; what it throws is shown as the error
 */
export function openDialog(options) {
  const id = `dialog-title-${++ids}`;
  const result = h("p", { class: "result", role: "status", "aria-live": "polite" });
  const cancel = h("button", { type: "button", class: "button", "data-cancel": true }, "Cancel");
  const confirm = h("button", { type: "submit", class: `button ${options.danger ? "danger" : "primary"}`, "data-confirm": true }, options.confirm);
  const form = /** @type {HTMLFormElement} */ (
    h(
      "form",
      { method: "dialog", class: "dialog-form" },
      h("h2", { id }, options.title),
      ...(options.body ?? []),
      result,
      h("div", { class: "dialog-actions" }, cancel, confirm),
    )
  );
  const dialog = /** @type {HTMLDialogElement} */ (h("dialog", { class: "dialog", "aria-labelledby": id }, form));
  let finished = false;
  cancel.addEventListener("click", () => dialog.close());
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (finished) return dialog.close();
    /** @type {HTMLButtonElement} */ (confirm).disabled = true;
    result.className = "result working";
    result.textContent = "Working…";
    try {
      const text = await options.run(form);
      finished = true;
      result.className = "result ok";
      result.textContent = text;
      confirm.textContent = "Close";
      confirm.className = "button";
      cancel.hidden = true;
      for (const field of form.querySelectorAll("input, select, textarea")) /** @type {HTMLInputElement} */ (field).disabled = true;
      options.done?.();
    } catch (error) {
      result.className = "result error";
      result.textContent = error instanceof Error ? error.message : String(error);
    } finally {
      /** @type {HTMLButtonElement} */ (confirm).disabled = false;
      confirm.focus();
    }
  });
  dialog.addEventListener("close", () => dialog.remove());
  document.body.append(dialog);
  dialog.showModal();
  return dialog;
}

/**
 * A labelled form field.
 * @param {string} label
 * @param {HTMLElement} control it gets an id, for the label
 * @param {string} [hint]
 */
export function field(label, control, hint) {
  const id = control.id || `field-${++ids}`;
  control.id = id;
  return h("div", { class: "field" }, h("label", { for: id }, label), control, hint ? h("small", { class: "muted" }, hint) : null);
}
