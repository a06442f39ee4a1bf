/**
 * The tests' call from Node to a VQueueObject in workerd, over plain HTTP on Miniflare's loopback port:
 * POST /__object/<name>/<method> with the arguments, answered with the result or the error's
 * message. Miniflare's object proxy is not used: its blocking look-ups (one per property read)
 * could answer a look-up with the previous one's reply on a loaded machine, and from then on
 * every call in the file failed.
 *
 * Values cross as JSON: a Uint8Array as { $bytes: base64 }, undefined as { $undefined: 1 }.
 */
import { fromBase64, toBase64 } from "../../src/core/base64";

export const RPC_PREFIX = "/__object/";

export const encode = (value: unknown): string =>
  JSON.stringify({ value }, (_key, v: unknown) => (v instanceof Uint8Array ? { $bytes: toBase64(v) } : v === undefined ? { $undefined: 1 } : v));

export const decode = (text: string): unknown =>
  (
    JSON.parse(text, (_key, v: unknown) => {
      if (v && typeof v === "object" && !Array.isArray(v)) {
        if ("$bytes" in v) return fromBase64((v as { $bytes: string }).$bytes)!;
        if ("$undefined" in v) return undefined;
      }
      return v;
    }) as { value: unknown }
  ).value;

type Method = (...args: unknown[]) => Promise<unknown>;

/** Answers an RPC request with `objectOf(name)[method](...args)`: 200 with the result, 500 with the error's message. */
export async function answerCall(request: Request, objectOf: (name: string) => Record<string, Method>): Promise<Response> {
  const [name = "", method = ""] = new URL(request.url).pathname.slice(RPC_PREFIX.length).split("/").map(decodeURIComponent);
  try {
    const args = decode(await request.text()) as unknown[];
    return new Response(encode(await objectOf(name)[method]!(...args)));
  } catch (error) {
    return Response.json({ message: error instanceof Error ? error.message : String(error) }, { status: 500 });
  }
}

/** Calls `method` of the object named `name` through the Worker served at `base` (Miniflare's loopback URL). */
export async function callObject(base: string, name: string, method: string, args: unknown[]): Promise<unknown> {
  const response = await fetch(`${base}${RPC_PREFIX}${encodeURIComponent(name)}/${encodeURIComponent(method)}`, { method: "POST", body: encode(args) });
  const text = await response.text();
  if (!response.ok) throw new Error((JSON.parse(text) as { message: string }).message);
  return decode(text);
}
