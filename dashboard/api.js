// @ts-check
/**
 * The API as the page calls it: relative URLs (`./api/v1/...`) so the page works under any
 * prefix, the browser's own Basic credentials, and every failure as an `ApiProblem` saying what
 * went wrong, which the page shows in its banner or dialog (never thrown to the console).
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
 * The absolute URL of `path`, without the credentials of a page opened as
 * `http://user:pass@host/`: fetch refuses a URL holding credentials, and the browser sends the
 * Basic credentials it has for the origin anyway.
 * @param {string} path
 */
export function apiURL(path) {
  const url = new URL(path, document.baseURI);
  url.username = "";
  url.password = "";
  return url.href;
}

/**
 * Calls the API: JSON in (when `body` is given), JSON out.
 * @param {"GET" | "POST" | "DELETE"} method
 * @param {string} path relative, e.g. `./api/v1/overview`
 * @param {{ body?: unknown, signal?: AbortSignal, headers?: Record<string, string> }} [options]
 * @returns {Promise<any>}
 */
export async function call(method, path, { body, signal, headers: extra } = {}) {
  /** @type {Record<string, string>} */
  const headers = { ...extra, accept: "application/json" };
  if (body !== undefined) headers["content-type"] = "application/json";
  let request;
  try {
    request = new Request(apiURL(path), {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
      credentials: "same-origin",
      cache: "no-store",
    });
  } catch (error) {
    throw new ApiProblem(0, "E_REQUEST", `This page could not make its request ${method} ${path}: ${messageOf(error)}`);
  }
  let response;
  let text;
  try {
    response = await fetch(request);
    text = await response.text();
  } catch (error) {
    if (isAbort(error)) throw error;
    throw unreachable(new URL(request.url).host, error);
  }
  let data;
  try {
    data = text ? JSON.parse(text) : undefined;
  } catch {
    data = undefined;
  }
  if (response.ok && (data !== undefined || !text)) return data;
  throw refused(response, data);
}

/** A fetch that got no answer (or half of one): the browser offline, or the server down or unreachable. */
function unreachable(/** @type {string} */ host, /** @type {unknown} */ error) {
  if (navigator.onLine === false) return new ApiProblem(0, "E_OFFLINE", "This browser is offline: no request reaches the v-queue server.");
  return new ApiProblem(
    0,
    "E_UNREACHABLE",
    `No answer from the v-queue server at ${host} (${messageOf(error)}): it is down, restarting, or unreachable from here.`,
  );
}

/**
 * An answer that is no success of the API: the server's own error when it sent one; else what
 * answered (a proxy, or the host app, in the server's place).
 * @param {Response} response
 * @param {any} data its JSON body, if any
 */
function refused(response, data) {
  const { status } = response;
  const error = data?.error;
  const code = error?.code ?? `HTTP_${status}`;
  // The status alone: HTTP/2 and many servers send no reason phrase.
  const answered = `HTTP ${status}`;
  if (response.ok) {
    const type = response.headers.get("content-type") ?? "no content type";
    return new ApiProblem(
      status,
      "E_NOT_JSON",
      `The server answered ${answered} with ${type}, not the API's JSON: something in front of v-queue (a proxy, the host app) answered in its place.`,
    );
  }
  if (status === 401)
    return new ApiProblem(status, code, `The server refused the credentials${error?.message ? ` (${error.message})` : ""}: reload the page to sign in again.`);
  if (status === 403) return new ApiProblem(status, code, `Not allowed: ${error?.message ?? "this user lacks the right for it."}`);
  if (!error?.message)
    return new ApiProblem(
      status,
      code,
      `The server answered ${answered} with no v-queue error: something in front of v-queue (a proxy, the host app) answered in its place.`,
    );
  if (status >= 500) return new ApiProblem(status, code, `The v-queue server failed (${answered}, ${code}): ${error.message}`);
  return new ApiProblem(status, code, error.message);
}

/** An error's message (what a caught value says). */
function messageOf(/** @type {unknown} */ error) {
  return error instanceof Error ? error.message : String(error);
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
