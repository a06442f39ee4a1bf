import { getRouterParam } from "h3";
import { DASHBOARD_ASSETS, DASHBOARD_INDEX, type DashboardAsset } from "../dashboard/assets.generated";
import { ApiError } from "../errors";
import { errorRef, serverErrors } from "../openapi";
import type { ApiRoute, RouteContext } from "../route";

/**
 * The dashboard (`dashboard` option, on by default): the page at `/` and its assets at
 * `/_dashboard/<name>`, behind the same auth as the API (a browser without credentials gets
 * the 401's `WWW-Authenticate` challenge and prompts). The page uses relative URLs only, so
 * it works under any prefix. Assets are built into `runtime/dashboard/assets.generated.ts`
 * (`npm run dashboard`); their names carry their hash, so they are cached for a year.
 */
/** A cached copy's ETag: the same file again is a 304 without a body. */
const etag = { ETag: { description: "This copy's tag, for If-None-Match", schema: { type: "string" } } };
const ifNoneMatch = { name: "If-None-Match", in: "header", schema: { type: "string" }, description: "ETag(s) of a copy the client holds" };

export function dashboardRoutes(ctx: RouteContext): ApiRoute[] {
  if (!ctx.options.dashboard) return [];
  return [
    {
      method: "GET",
      route: "/",
      openapi: {
        operationId: "getDashboard",
        summary: "The dashboard page (HTML)",
        parameters: [ifNoneMatch],
        responses: { ...serverErrors, "200": { description: "the page", headers: etag, content: { "text/html": {} } }, "304": { description: "not modified" } },
      },
      handler: (event) => serve(event.req, DASHBOARD_INDEX, "no-cache"),
    },
    {
      method: "GET",
      route: "/_dashboard/:asset",
      openapi: {
        operationId: "getDashboardAsset",
        summary: "A file of the dashboard (names carry their content hash)",
        parameters: [ifNoneMatch],
        responses: { ...serverErrors, "404": errorRef, "200": { description: "the file", headers: etag }, "304": { description: "not modified" } },
      },
      handler: (event) => {
        const name = getRouterParam(event, "asset") ?? "";
        const asset = Object.hasOwn(DASHBOARD_ASSETS, name) ? DASHBOARD_ASSETS[name] : undefined;
        if (!asset) throw new ApiError(404, "E_NOT_FOUND", `No dashboard file ${JSON.stringify(name.slice(0, 80))}.`);
        return serve(event.req, asset, "private, max-age=31536000, immutable");
      },
    },
  ];
}

/** Each asset gzipped once, on first request that accepts it (CompressionStream: web-standard). */
const gzipped = new Map<string, Promise<Uint8Array>>();
const encoder = new TextEncoder();

async function serve(request: Request, asset: DashboardAsset, cacheControl: string): Promise<Response> {
  // The gzipped body is another representation: another strong ETag (RFC 9110 8.8.3).
  const zip = acceptsGzip(request.headers.get("accept-encoding"));
  const etag = zip ? `"${asset.hash}-gz"` : `"${asset.hash}"`;
  const headers: Record<string, string> = {
    "content-type": asset.type,
    etag,
    "cache-control": cacheControl,
    vary: "accept-encoding",
    "x-content-type-options": "nosniff",
  };
  if (asset.type.startsWith("text/html")) {
    // The page runs only its own files; it calls only its own origin.
    headers["content-security-policy"] =
      "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";
    headers["referrer-policy"] = "no-referrer";
  }
  if (matches(request.headers.get("if-none-match"), etag)) return new Response(null, { status: 304, headers });
  let body: Uint8Array;
  if (zip) {
    let zipped = gzipped.get(asset.hash);
    if (!zipped) gzipped.set(asset.hash, (zipped = gzip(asset.body)));
    body = await zipped;
    headers["content-encoding"] = "gzip";
  } else body = encoder.encode(asset.body);
  headers["content-length"] = String(body.length);
  // workerd gzips a body sent with `content-encoding` itself unless told it already is ("manual";
  // a Cloudflare extension, ignored elsewhere): without it the page arrived gzipped twice.
  const init = { status: 200, headers, encodeBody: "manual" } as ResponseInit;
  return new Response(request.method === "HEAD" ? null : (body as Uint8Array<ArrayBuffer>), init);
}

async function gzip(text: string): Promise<Uint8Array> {
  const stream = new Blob([text]).stream().pipeThrough(new CompressionStream("gzip"));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

/** Whether `If-None-Match` names `etag` (or is `*`). */
function matches(header: string | null, etag: string): boolean {
  if (!header) return false;
  return header.split(",").some((tag) => {
    const t = tag.trim().replace(/^W\//, "");
    return t === "*" || t === etag;
  });
}

/** Whether `Accept-Encoding` takes gzip (with a q above 0). */
function acceptsGzip(header: string | null): boolean {
  if (!header) return false;
  return header.split(",").some((part) => {
    const [coding, ...params] = part.trim().toLowerCase().split(";");
    if (coding !== "gzip" && coding !== "*") return false;
    const q = params.map((p) => p.trim()).find((p) => p.startsWith("q="));
    return q === undefined || Number(q.slice(2)) > 0;
  });
}
