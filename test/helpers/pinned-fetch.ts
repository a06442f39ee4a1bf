/**
 * A `fetch` whose requests go over ONE kept-alive connection, one at a time (a new connection
 * only once that one closed): a client that stays with the process that accepted its connection,
 * as behind Nitro's `node-cluster` primary, which hands each connection to a worker in turn.
 * Text bodies only (what the chaos harness sends).
 */
import { Agent, request } from "node:http";

export function pinnedFetch(): typeof fetch {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  return (input, init = {}) =>
    new Promise<Response>((resolve, reject) => {
      const { signal } = init;
      if (signal?.aborted) return reject(signal.reason);
      const headers = Object.fromEntries(new Headers(init.headers));
      const req = request(String(input), { method: init.method ?? "GET", agent, headers }, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (chunk: Buffer) => chunks.push(chunk));
        res.on("error", reject);
        res.on("end", () => {
          const status = res.statusCode!;
          const answerHeaders = Object.entries(res.headers).flatMap(([name, value]) => (typeof value === "string" ? [[name, value] as [string, string]] : []));
          resolve(new Response([204, 205, 304].includes(status) ? null : Buffer.concat(chunks), { status, headers: answerHeaders }));
        });
      });
      // Aborted: the connection goes (the next request opens another, maybe to another process).
      signal?.addEventListener("abort", () => req.destroy(signal.reason instanceof Error ? signal.reason : new Error("aborted")), { once: true });
      req.on("error", reject);
      req.end(typeof init.body === "string" ? init.body : undefined);
    });
}
