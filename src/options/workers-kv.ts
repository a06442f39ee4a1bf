/**
 * Workers KV is refused as queue storage: it is eventually consistent (a write can take a minute
 * or more to be seen in other locations) and has no compare-and-set, so it can hold neither a
 * writer lock nor an append-only log: two writers would both "hold" the lock and overwrite each
 * other's appends. A Durable Object is the single owner that can (v-queue/drivers/durable-object).
 */

const KV_DRIVERS = new Set(["cloudflare-kv-binding", "cloudflare-kv-http"]);

/** Why `value` (given as option `name`) is refused as Workers KV, or undefined when it is not KV. */
export function workersKvProblem(value: unknown, name: string): string | undefined {
  const what = kvKind(value);
  return what
    ? `Invalid ${name}: ${what} is Workers KV, which is eventually consistent and has no compare-and-set: it cannot hold a writer lock or an append-only log safely. On Cloudflare use the Durable Object driver: durableObjectDriver({ namespace: env.VQUEUE }) from "v-queue/drivers/durable-object", with the VQueueObject class from "v-queue/cloudflare" bound as VQUEUE (docs/runtimes.md#cloudflare-workers).`
    : undefined;
}

function kvKind(value: unknown): string | undefined {
  if (typeof value !== "object" || value === null) return undefined;
  const v = value as Record<string, unknown>;
  // A KV namespace binding (env.MY_KV): get, put, list, delete and getWithMetadata, and no driver methods.
  if (["get", "put", "list", "delete", "getWithMetadata"].every((m) => typeof v[m] === "function") && typeof v.openLog !== "function")
    return "a KV namespace binding";
  // An unstorage driver object, or an unstorage Storage with such a driver mounted.
  if (typeof v.name === "string" && KV_DRIVERS.has(v.name)) return `unstorage's ${v.name} driver`;
  if (typeof v.getMounts === "function") {
    for (const mount of (v.getMounts as (base: string, parents?: boolean) => { driver?: { name?: string } }[])("", true)) {
      const driverName = mount.driver?.name;
      if (driverName && KV_DRIVERS.has(driverName)) return `an unstorage storage on its ${driverName} driver`;
    }
  }
  return undefined;
}
