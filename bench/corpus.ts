/**
 * A generated corpus of realistic JSON log lines (200 B to 2 KiB), the same for a given seed:
 * the compression bench's input. Lines look like a service's structured logs: a timestamp,
 * a level, a service and host, request and trace ids, an HTTP request, a message from a set
 * of templates, nested context, and now and then an error with a stack.
 */
import { seededRandom } from "./util";

const LEVELS = ["info", "info", "info", "info", "debug", "debug", "warn", "error"] as const;
const SERVICES = ["checkout", "payments", "inventory", "auth", "search", "notifications", "gateway", "billing"];
const METHODS = ["GET", "GET", "GET", "POST", "POST", "PUT", "DELETE", "PATCH"];
const PATHS = [
  "/api/v2/orders",
  "/api/v2/orders/:id",
  "/api/v2/cart",
  "/api/v1/users/:id",
  "/api/v1/login",
  "/api/v2/search",
  "/api/v2/items/:id/stock",
  "/health",
  "/api/v2/invoices/:id/pdf",
];
const REGIONS = ["eu-west-1", "eu-central-1", "us-east-1", "us-west-2", "ap-southeast-1"];
const AGENTS = [
  "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
  "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_6) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15",
  "okhttp/4.12.0",
  "python-requests/2.32.3",
  "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148",
];
const MESSAGES = [
  "request completed",
  "order placed by customer {user} with {n} items",
  "cache miss for key {key}, loading from database",
  "payment authorized for amount {amount} EUR",
  "retrying upstream call to {service} (attempt {n})",
  "user {user} logged in from {ip}",
  "slow query detected: {ms} ms on table {table}",
  "stock level below threshold for sku {sku}",
  "token refreshed for session {id}",
  "rate limit exceeded for client {ip}",
];
const TABLES = ["orders", "order_items", "customers", "payments", "inventory", "sessions"];
const ERRORS = ["TimeoutError", "ConnectionResetError", "ValidationError", "NotFoundError"];
const FRAMES = [
  "at processOrder (/srv/app/dist/orders/service.js:214:17)",
  "at async Router.handle (/srv/app/node_modules/express/lib/router/index.js:284:7)",
  "at Pool.query (/srv/app/node_modules/pg-pool/index.js:45:11)",
  "at async PaymentClient.authorize (/srv/app/dist/payments/client.js:88:24)",
  "at validateCart (/srv/app/dist/cart/validate.js:31:9)",
];

/** `count` JSON log lines of 200 B to 2 KiB, as UTF-8 text. */
export function logCorpus(count: number, seed = 1): string[] {
  const rnd = seededRandom(seed);
  const pick = <T>(list: readonly T[]): T => list[Math.floor(rnd() * list.length)]!;
  const int = (min: number, max: number) => min + Math.floor(rnd() * (max - min + 1));
  const hex = (n: number) => Array.from({ length: n }, () => "0123456789abcdef"[int(0, 15)]).join("");
  const ip = () => `${int(10, 223)}.${int(0, 255)}.${int(0, 255)}.${int(1, 254)}`;
  let time = Date.parse("2026-12-03T08:00:00.000Z");
  const lines: string[] = [];
  while (lines.length < count) {
    time += int(0, 40);
    const level = pick(LEVELS);
    const service = pick(SERVICES);
    const user = `u_${int(1000, 99999)}`;
    const message = pick(MESSAGES).replace(/\{(\w+)\}/g, (_m, k: string) =>
      k === "user"
        ? user
        : k === "n"
          ? String(int(1, 9))
          : k === "key"
            ? `${service}:${hex(8)}`
            : k === "amount"
              ? (int(100, 99999) / 100).toFixed(2)
              : k === "service"
                ? pick(SERVICES)
                : k === "ip"
                  ? ip()
                  : k === "ms"
                    ? String(int(200, 9000))
                    : k === "table"
                      ? pick(TABLES)
                      : k === "sku"
                        ? `SKU-${int(10000, 99999)}`
                        : hex(16),
    );
    const entry: Record<string, unknown> = {
      ts: new Date(time).toISOString(),
      level,
      service,
      host: `${service}-${hex(5)}-${int(1, 12)}`,
      region: pick(REGIONS),
      request_id: `${hex(8)}-${hex(4)}-${hex(4)}-${hex(4)}-${hex(12)}`,
      trace_id: hex(32),
      msg: message,
    };
    const target = int(200, 2048);
    const extras: (() => void)[] = [
      () =>
        (entry.http = {
          method: pick(METHODS),
          path: pick(PATHS).replace(":id", String(int(1, 999999))),
          status: pick([200, 200, 200, 201, 204, 304, 400, 404, 500, 503]),
          duration_ms: int(1, 2500),
          bytes_out: int(0, 200_000),
        }),
      () => (entry.user = { id: user, plan: pick(["free", "pro", "enterprise"]), country: pick(["DE", "FR", "US", "GB", "NL", "ES"]) }),
      () => (entry.client = { ip: ip(), user_agent: pick(AGENTS) }),
      () => (entry.db = { table: pick(TABLES), rows: int(0, 5000), query_ms: int(0, 900), pool: { active: int(0, 20), idle: int(0, 20), waiting: int(0, 5) } }),
      () => (entry.tags = Array.from({ length: int(1, 5) }, () => pick(["canary", "beta", "mobile", "batch", "retry", "cache", "internal", "partner"]))),
      () =>
        (entry.cart = {
          items: Array.from({ length: int(1, 6) }, () => ({ sku: `SKU-${int(10000, 99999)}`, qty: int(1, 4), price: int(199, 19999) / 100 })),
          currency: "EUR",
        }),
      () =>
        (entry.error = {
          type: pick(ERRORS),
          message: `${pick(["upstream", "database", "validation"])} failed after ${int(1, 30)}s`,
          stack: Array.from({ length: int(2, 5) }, () => pick(FRAMES)),
        }),
      () => (entry.feature_flags = { new_checkout: rnd() < 0.5, search_v3: rnd() < 0.3, dark_mode: rnd() < 0.6 }),
    ];
    let text = JSON.stringify(entry);
    for (const add of extras.sort(() => rnd() - 0.5)) {
      if (text.length >= target) break;
      add();
      text = JSON.stringify(entry);
    }
    if (text.length < 200 || text.length > 2048) continue;
    lines.push(text);
  }
  return lines;
}
