import { FastResponse } from "srvx";
import { getRouterParam, type H3Event } from "h3";
import { isValidName, nameRule } from "../src/core/names";
import { authorize, type Principal, type Right } from "./auth";
import { ApiError, JSON_TYPE } from "./errors";

/**
 * A queue or consumer name from the path, percent-decoded, then checked against the engine's
 * rule: no `/`, no `..`, no NUL can reach the storage, whatever the encoding.
 */
export function nameParam(event: H3Event, param: "queue" | "consumer"): string {
  const raw = getRouterParam(event, param) ?? "";
  let name: string;
  try {
    name = decodeURIComponent(raw);
  } catch {
    throw new ApiError(400, "E_NAME", `Invalid ${param} name: bad percent-encoding.`);
  }
  if (!isValidName(name, param)) {
    const text: string = name;
    const shown = JSON.stringify(text.length > 64 ? `${text.slice(0, 64)}…` : text);
    throw new ApiError(400, "E_NAME", `Invalid ${param} name ${shown}: use ${nameRule(param)}.`);
  }
  return name;
}

/** `{queue}` and `{consumer}` of a consumer route, checked, once `principal` has `right` on the queue. */
export function consumerParams(event: H3Event, principal: Principal | undefined, right: Right = "read"): { queue: string; consumer: string } {
  const queue = nameParam(event, "queue");
  const consumer = nameParam(event, "consumer");
  authorize(principal, right, queue);
  return { queue, consumer };
}

/** The whole body, refusing (413) more than `limit` bytes: by content-length at once, or while streaming. */
export async function readBodyLimited(request: Request, limit: number): Promise<Uint8Array> {
  const tooLarge = () => new ApiError(413, "E_TOO_LARGE", `Request body is larger than the limit of ${limit} bytes.`);
  const declared = request.headers.get("content-length");
  if (declared !== null && Number(declared) > limit) throw tooLarge();
  // On Node (h3 v2 over srvx), the Node request itself: a web stream around it costs more than
  // a small body's whole handling. Only while nobody has started on the body.
  const node = (request as NodeBackedRequest).runtime?.node?.req;
  if (node && !request.bodyUsed && !node.readableEnded && typeof node.on === "function") return readNodeBody(node, limit, tooLarge);
  if (!request.body) return new Uint8Array(0);
  const chunks: Uint8Array[] = [];
  let total = 0;
  const reader = request.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.length;
    if (total > limit) {
      // Stop reading, without cancelling: cancelling destroys the socket under Node before the
      // 413 is written. The host discards the rest.
      reader.releaseLock();
      throw tooLarge();
    }
    chunks.push(value);
  }
  return concat(chunks, total);
}

/** What runtime/ needs of a Node `IncomingMessage` (no Node types here: the runtime is web-standard). */
interface NodeBody {
  readonly readableEnded: boolean;
  on(event: string, listener: (chunk?: never) => void): unknown;
  off(event: string, listener: (chunk?: never) => void): unknown;
  resume(): unknown;
}

interface NodeBackedRequest {
  runtime?: { node?: { req?: NodeBody } };
}

function readNodeBody(req: NodeBody, limit: number, tooLarge: () => ApiError): Promise<Uint8Array> {
  return new Promise((resolve, reject) => {
    const chunks: Uint8Array[] = [];
    let total = 0;
    const listeners: [string, (chunk?: never) => void][] = [
      [
        "data",
        (chunk?: Uint8Array) => {
          total += chunk!.length;
          if (total <= limit) return void chunks.push(chunk!);
          // The rest is read and dropped, as Node does with a body nobody reads; the 413 goes out now.
          done();
          req.resume();
          reject(tooLarge());
        },
      ],
      ["end", () => (done(), resolve(concat(chunks, total)))],
      ["error", (error?: Error) => (done(), reject(error))],
      ["close", () => (done(), reject(new ApiError(400, "E_BODY", "The request body was cut off.")))],
    ];
    const done = () => {
      for (const [event, listener] of listeners) req.off(event, listener);
    };
    for (const [event, listener] of listeners) req.on(event, listener);
  });
}

function concat(chunks: Uint8Array[], total: number): Uint8Array {
  if (chunks.length === 1) return chunks[0]!;
  const out = new Uint8Array(total);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}

/** The media type of a header, lower-cased, without parameters. */
export function mediaType(value: string | null): string {
  return (value ?? "").split(";")[0]!.trim().toLowerCase();
}

/**
 * A JSON response; `T` is the body's shape from `api.ts`, checked where the route builds it.
 * Responses are srvx's `FastResponse`, as h3's own: on Node the body goes to the socket as it
 * is, with no web stream around it; elsewhere it is the platform's `Response`.
 */
export function json<T>(body: T, status = 200, headers?: Record<string, string>): Response {
  return new FastResponse(JSON.stringify(body), { status, headers: { "content-type": JSON_TYPE, ...headers } });
}
