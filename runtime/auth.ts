import type { ResolvedAuth } from "./types";
import { ApiError } from "./errors";
import { utf8Strict } from "../protocol/utf8";

export type Right = "read" | "write" | "admin";

/** Who made a request: `undefined` when auth is off. */
export interface Principal {
  username: string;
  read: boolean | string[];
  write: boolean | string[];
  admin: boolean | string[];
}

const encoder = new TextEncoder();

// Not h3's requireBasicAuth: its 401 has no JSON error body, it waits 0-99 ms at random on each, and reads non-UTF-8 credentials as latin1.
/**
 * Checks Basic credentials (RFC 7617) against every configured user, in constant time:
 * both names and passwords are compared as SHA-256 digests, with no early exit.
 */
export async function authenticate(request: Request, auth: ResolvedAuth): Promise<Principal> {
  const challenge = { "www-authenticate": `Basic realm="${auth.realm}", charset="UTF-8"` };
  // RFC 7617: user-pass is UTF-8 (we announce charset="UTF-8"); a leading U+FEFF is part of the name.
  const credentials = basicCredentials(request.headers.get("authorization"), utf8Strict);
  if (!credentials) throw new ApiError(401, "E_AUTH", "Authentication required (HTTP Basic).", challenge);
  if (credentials === "malformed") throw new ApiError(401, "E_AUTH", "Malformed Basic credentials.", challenge);
  const [user, pass] = await Promise.all([digest(credentials.user), digest(credentials.pass)]);
  let found: Principal | undefined;
  for (const candidate of await hashedUsers(auth)) {
    const ok = equal(user, candidate.user) & equal(pass, candidate.pass);
    if (ok === 1 && !found) found = candidate.principal;
  }
  if (!found) throw new ApiError(401, "E_AUTH", "Wrong username or password.", challenge);
  return found;
}

/**
 * The user and password of a Basic `Authorization` header, decoded with `decoder`: undefined
 * when there is no Basic header, "malformed" when it does not decode or has no colon.
 */
export function basicCredentials(header: string | null, decoder: TextDecoder): { user: string; pass: string } | "malformed" | undefined {
  const match = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header ?? "");
  if (!match) return undefined;
  let decoded: string;
  try {
    decoded = decoder.decode(Uint8Array.from(atob(match[1]!), (c) => c.charCodeAt(0)));
  } catch {
    return "malformed";
  }
  const colon = decoded.indexOf(":");
  return colon < 0 ? "malformed" : { user: decoded.slice(0, colon), pass: decoded.slice(colon + 1) };
}

/** Throws 403 unless `principal` has `right` on `queue` (any queue when `queue` is undefined). */
export function authorize(principal: Principal | undefined, right: Right, queue?: string): void {
  if (!principal || can(principal, right, queue)) return;
  const what = queue === undefined ? "" : ` on queue "${queue}"`;
  throw new ApiError(403, "E_FORBIDDEN", `User "${principal.username}" has no ${right} right${what}.`);
}

/** Whether `principal` may `right` on `queue` (on some queue when `queue` is undefined). */
export function can(principal: Principal | undefined, right: Right, queue?: string): boolean {
  if (!principal) return true;
  const grant = principal[right];
  if (grant === true) return true;
  if (!Array.isArray(grant)) return false;
  return queue === undefined ? grant.length > 0 : grant.includes(queue);
}

// --- Internal helpers ---

interface HashedUser {
  user: Uint8Array;
  pass: Uint8Array;
  principal: Principal;
}

const hashed = new WeakMap<ResolvedAuth, Promise<HashedUser[]>>();

function hashedUsers(auth: ResolvedAuth): Promise<HashedUser[]> {
  let users = hashed.get(auth);
  if (!users) {
    users = Promise.all(
      auth.users.map(async (u) => ({
        user: await digest(u.username),
        pass: await digest(u.password),
        principal: { username: u.username, read: u.read, write: u.write, admin: u.admin },
      })),
    );
    hashed.set(auth, users);
  }
  return users;
}

async function digest(text: string): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.digest("SHA-256", encoder.encode(text)));
}

/** 1 when equal, else 0; the time depends only on the (fixed) length. */
function equal(a: Uint8Array, b: Uint8Array): number {
  let diff = a.length ^ b.length;
  for (let i = 0; i < a.length; i++) diff |= a[i]! ^ (b[i] ?? 0);
  return diff === 0 ? 1 : 0;
}
