// @ts-check
/**
 * The API as the page calls it: relative URLs (`./api/v1/...`) so the page works under any
 * prefix, the browser's own Basic credentials, and every failure as an `ApiProblem` the page
 * shows in its banner or dialog (never thrown to the console).
 */

export class ApiProblem extends Error {
  /**
   * @param {number} status 0 when the server could not be reached
   * @param {string} code
   * @param {string} message
   */
  constructor(status, code, message) {
    super(message);
    this.name = "ApiProblem";
    this.status = status;
    this.code = code;
  }
}

/** Whether `error` is a request cancelled on purpose (the page moved on). */
export function isAbort(/** @type {unknown} */ error) {
  return error instanceof DOMException && error.name === "AbortError";
}

/**
 * Calls the API: JSON in (when `body` is given), JSON out.
 * @param {"GET" | "POST" | "DELETE"} method
 * @param {string} path relative, e.g. `./api/v1/overview`
 * @param {{ body?: unknown, signal?: AbortSignal }} [options]
 * @returns {Promise<any>}
 */
export async function call(method, path, { body, signal } = {}) {
  /** @type {Record<string, string>} */
  const headers = { accept: "application/json" };
  if (body !== undefined) headers["content-type"] = "application/json";
  let response;
  try {
    response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), signal, credentials: "same-origin", cache: "no-store" });
  } catch (error) {
    if (isAbort(error)) throw error;
    throw new ApiProblem(0, "NETWORK", "Cannot reach the v-queue server. Retrying…");
  }
  const text = await response.text().catch(() => "");
  let data;
  try {
    data = text ? JSON.parse(text) : undefined;
  } catch {
    data = undefined;
  }
  if (response.ok) return data;
  const error = data?.error;
  const message =
    response.status === 401
      ? "Not signed in, or the credentials were refused: reload the page to sign in again."
      : response.status === 403
        ? `Not allowed: ${error?.message ?? "this user lacks the right for it."}`
        : (error?.message ?? `The server answered ${response.status} ${response.statusText}.`);
  throw new ApiProblem(response.status, error?.code ?? `HTTP_${response.status}`, message);
}

/** A path segment. */
export const seg = encodeURIComponent;

/** `./api/v1/queues/<queue>` followed by `rest`. */
export function queuePath(/** @type {string} */ queue, rest = "") {
  return `./api/v1/queues/${seg(queue)}${rest}`;
}

/**
 * GETs `path` with `?history=<points>` (the server answers at most its `monitor.historyPoints`).
 * @param {string} path without a query
 * @param {number} points
 * @param {AbortSignal} signal
 */
export function withHistory(path, points, signal) {
  return call("GET", `${path}?history=${points}`, { signal });
}
