// Over 300 lines: the lease, ack, nack, extend, release, back-off and redrive routes, each mostly its OpenAPI
// description beside its handler.
import { FastResponse } from "srvx";
import type {
  AckResponse,
  BackOffResponse,
  ExtendResponse,
  LeaseErrorJSON,
  LeaseResponse,
  NackResponse,
  ProgressResponse,
  RedriveResponse,
} from "../../protocol/api";
import { toBase64 } from "../../protocol/base64";
import { BATCH_CONTENT_TYPE, leaseToken } from "../../protocol/binary";
import { utf8Strict } from "../../protocol/utf8";
import { redrive } from "../../src/consumers/shared/dead-letter";
import { VQueueError } from "../../src/core/errors";
import type { LeaseRef } from "../../src/consumers/types";
import { MAX_LEASE_MS } from "../../src/options/shared";
import { MAX_OUTCOME_BYTES, outcomeValueJson } from "../../src/format/outcome";
import { authorize } from "../auth";
import { ApiError, JSON_TYPE } from "../errors";
import { bodyErrors, errorRef, errorResponses, jsonContent, conflictRef } from "../openapi";
import { consumerParams, json, mediaType, nameParam, readBodyLimited } from "../request";
import type { ApiRoute, RouteContext } from "../route";
import { queueForm, type QueueForm } from "../queue-form";
import type { Settled } from "../shared-slot";

/** Messages leased by one request when the body does not say. */
const DEFAULT_LEASE_MAX = 100;

const leasesSchema = { type: "array", items: { type: "string", description: 'A lease token "<part>.<offset>.<lease>"' }, minItems: 1 };
const errorsSchema = {
  type: "array",
  description: "The leases refused (E_LEASE: ran out and handed out again, or unknown)",
  items: {
    type: "object",
    required: ["lease", "code", "message"],
    properties: { lease: { type: "string" }, code: { type: "string" }, message: { type: "string" } },
  },
};
/** Every shared route reads a JSON body: too large (413), or not JSON (415). */
const sharedErrors = { ...errorResponses, ...bodyErrors, "409": conflictRef, "415": errorRef };
/** The shared routes' 200: every field always there. */
const answer = (description: string, properties: Record<string, unknown>) => ({
  ...sharedErrors,
  "200": { description, content: jsonContent({ type: "object", required: Object.keys(properties), properties }) },
});

/**
 * Shared consumers (docs/work-queues.md): lease, ack, nack, extend, and redrive of a
 * dead-letter queue. The server holds each shared consumer (registry.shared); a name used as
 * the other kind is 409 `E_KIND`. A batch's refused leases (`E_LEASE`: ran out and handed out
 * again, unknown) are error items of a 200, not a failure of the batch.
 */
export function sharedRoutes(ctx: RouteContext): ApiRoute[] {
  const { limits } = ctx.options;
  const consumerRoute = (action: string) => `/api/v1/queues/:queue/consumers/:consumer/${action}`;
  const body = async (request: Request) => parseBody(await readBodyLimited(request, limits.maxBodyBytes), request);
  const tokens = (value: unknown, form: QueueForm) => leaseTokens(value, limits.maxMessages, form);
  return [
    {
      method: "POST",
      route: consumerRoute("lease"),
      openapi: {
        operationId: "lease",
        summary:
          "Lease messages of a shared consumer (creates it): each goes to one worker at a time until acked, nacked, or its lease runs out; long poll with timeoutMs",
        requestBody: {
          required: false,
          content: jsonContent({
            type: "object",
            properties: {
              max: { type: "integer", minimum: 1, maximum: limits.maxMessages, default: DEFAULT_LEASE_MAX },
              leaseMs: { type: "integer", minimum: 1, maximum: MAX_LEASE_MS, description: "Default: the server's shared.leaseMs" },
              timeoutMs: { type: "integer", minimum: 0, maximum: limits.maxTimeoutMs, default: 0 },
            },
          }),
        },
        responses: {
          ...sharedErrors,
          "200": {
            description: `JSON, or with Accept: ${BATCH_CONTENT_TYPE} the VQL1 binary lease framing (README)`,
            headers: { "X-VQ-Count": { description: "A binary answer: how many messages it holds", schema: { type: "integer" } } },
            content: {
              ...jsonContent({
                type: "object",
                required: ["now", "messages"],
                properties: {
                  now: { type: "integer", description: "The server's clock (ms)" },
                  messages: { type: "array", items: { $ref: "#/components/schemas/LeasedMessage" } },
                },
              }),
              [BATCH_CONTENT_TYPE]: { schema: { type: "string", format: "binary" } },
            },
          },
        },
      },
      handler: async (event, principal) => {
        const { queue, consumer } = consumerParams(event, principal);
        const input = await body(event.req);
        const max = intField(input, "max", 1, limits.maxMessages) ?? DEFAULT_LEASE_MAX;
        const leaseMs = intField(input, "leaseMs", 1, MAX_LEASE_MS);
        const timeoutMs = intField(input, "timeoutMs", 0, limits.maxTimeoutMs) ?? 0;
        unknownFields(input, ["max", "leaseMs", "timeoutMs"]);
        const form = await queueForm(ctx.registry, queue);
        const binary = acceptsLeaseBatch(event.req.headers.get("accept"));
        const polled = timeoutMs > 0 ? ctx.metrics?.longPoll() : undefined;
        const messages = await ctx.tracing
          .traced(
            "receive",
            queue,
            consumer,
            event.req.headers,
            (leased) => leased.length,
            async () => {
              const slot = await form.leasing(consumer);
              return slot.lease({ max, maxBytes: limits.maxResponseBytes, leaseMs, timeoutMs, signal: event.req.signal });
            },
          )
          .finally(() => polled?.());
        const now = Date.now();
        // VQL1, or on a partitioned queue VQM1 (each record with its partition).
        if (binary)
          return new FastResponse(form.encodeLeases(messages, now), { headers: { "content-type": BATCH_CONTENT_TYPE, "x-vq-count": String(messages.length) } });
        const out: LeaseResponse = {
          now,
          messages: messages.map((m) => {
            const position = { part: m.part, offset: m.offset, seq: m.seq };
            const common = {
              ...(m.partition === undefined ? position : { partition: m.partition, ...position }),
              lease: leaseToken(m),
              deliveries: m.deliveries,
              leaseUntil: m.leaseUntil,
              ...(m.priority === undefined ? {} : { priority: m.priority }),
            };
            return typeof m.data === "string"
              ? { ...common, type: m.type, data: m.data }
              : { ...common, type: m.type, data: toBase64(m.data), encoding: "base64" as const };
          }),
        };
        return new FastResponse(JSON.stringify(out), { headers: { "content-type": JSON_TYPE } });
      },
    },
    {
      method: "POST",
      route: consumerRoute("ack"),
      openapi: {
        operationId: "ack",
        summary:
          "Acknowledge leased messages of a shared consumer; answered once durable. A lease that ran out is still taken unless the message went to another worker",
        requestBody: {
          required: true,
          content: jsonContent({
            type: "object",
            required: ["leases"],
            properties: {
              leases: leasesSchema,
              results: {
                type: "object",
                additionalProperties: { description: `Any JSON value, at most ${MAX_OUTCOME_BYTES} bytes as JSON` },
                description: "A result per lease token of `leases`: kept with the message's `completed` outcome (events, outcome)",
              },
            },
          }),
        },
        responses: answer("acked", { acked: { type: "integer" }, errors: errorsSchema }),
      },
      handler: async (event, principal) => {
        const { queue, consumer } = consumerParams(event, principal);
        const input = await body(event.req);
        const form = await queueForm(ctx.registry, queue);
        const refs = tokens(input.leases, form);
        const results = ackResults(input.results, refs);
        unknownFields(input, ["leases", "results"]);
        const slot = await form.leasing(consumer);
        const { done, errors } = leaseOutcomes(
          refs,
          await slot.ack(
            refs.map((r) => r.ref),
            results,
          ),
        );
        return json<AckResponse>({ acked: done.length, errors });
      },
    },
    {
      method: "POST",
      route: consumerRoute("progress"),
      openapi: {
        operationId: "progress",
        summary: "A progress update of a leased message: a `progress` outcome event (events); answered once durable. 409 E_LEASE unless the lease is held now",
        requestBody: {
          required: true,
          content: jsonContent({
            type: "object",
            required: ["lease", "progress"],
            properties: {
              lease: { type: "string", description: "The message's lease token" },
              progress: { description: `Any JSON value, at most ${MAX_OUTCOME_BYTES} bytes as JSON` },
            },
          }),
        },
        responses: answer("kept", { ok: { type: "boolean", const: true } }),
      },
      handler: async (event, principal) => {
        const { queue, consumer } = consumerParams(event, principal);
        const input = await body(event.req);
        const form = await queueForm(ctx.registry, queue);
        if (input.lease === undefined)
          throw new ApiError(400, "E_BODY", `Expected "lease": a lease token ${form.leaseTokenForm}, as given with a leased message.`);
        const lease = leaseOf(input.lease, form);
        if (!("progress" in input)) throw new ApiError(400, "E_BODY", `Expected "progress": any JSON value (at most ${MAX_OUTCOME_BYTES} bytes as JSON).`);
        checkOutcome("progress", input.progress);
        unknownFields(input, ["lease", "progress"]);
        const slot = await form.leasing(consumer);
        await slot.progress(lease.ref, input.progress);
        return json<ProgressResponse>({ ok: true });
      },
    },
    {
      method: "POST",
      route: consumerRoute("nack"),
      openapi: {
        operationId: "nack",
        summary: "Give leased messages back: they come again after delayMs, or go to the dead-letter queue (deadLetter, or after maxDeliveries)",
        requestBody: {
          required: true,
          content: jsonContent({
            type: "object",
            required: ["leases"],
            properties: {
              leases: leasesSchema,
              delayMs: {
                type: "integer",
                minimum: 0,
                maximum: MAX_LEASE_MS,
                description: "Again after this long. Default: the message's backoff (produce), else the consumer's backoff, else defaultDelayMs",
              },
              defaultDelayMs: {
                type: "integer",
                minimum: 0,
                maximum: MAX_LEASE_MS,
                description: "Without delayMs: the wait when neither the message nor the consumer has a backoff (default 0)",
              },
              error: { type: "string" },
              deadLetter: { type: "boolean" },
              release: { type: "boolean", description: "nobody worked on them: this delivery is not counted, never dead-lettered" },
            },
          }),
        },
        responses: answer("nacked", { nacked: { type: "integer" }, errors: errorsSchema }),
      },
      handler: async (event, principal) => {
        const { queue, consumer } = consumerParams(event, principal);
        const input = await body(event.req);
        const form = await queueForm(ctx.registry, queue);
        const refs = tokens(input.leases, form);
        const delayMs = intField(input, "delayMs", 0, MAX_LEASE_MS);
        const defaultDelayMs = intField(input, "defaultDelayMs", 0, MAX_LEASE_MS);
        if (input.error !== undefined && typeof input.error !== "string")
          throw new ApiError(400, "E_BODY", `Invalid error ${JSON.stringify(input.error)}: a string saying why the messages failed.`);
        if (input.deadLetter !== undefined && typeof input.deadLetter !== "boolean")
          throw new ApiError(400, "E_BODY", `Invalid deadLetter ${JSON.stringify(input.deadLetter)}: use true or false.`);
        if (input.release !== undefined && typeof input.release !== "boolean")
          throw new ApiError(400, "E_BODY", `Invalid release ${JSON.stringify(input.release)}: use true or false.`);
        if (input.release === true && input.deadLetter === true) throw new ApiError(400, "E_BODY", "Invalid nack: release and deadLetter exclude each other.");
        unknownFields(input, ["leases", "delayMs", "defaultDelayMs", "error", "deadLetter", "release"]);
        const slot = await form.leasing(consumer);
        const settled = await slot.nack(
          refs.map((r) => r.ref),
          {
            delayMs,
            defaultDelayMs,
            error: input.error as string | undefined,
            deadLetter: input.deadLetter as boolean | undefined,
            release: input.release as boolean | undefined,
          },
        );
        const { done, errors } = leaseOutcomes(refs, settled);
        return json<NackResponse>({ nacked: done.length, errors });
      },
    },
    {
      method: "POST",
      route: consumerRoute("extend"),
      openapi: {
        operationId: "extend",
        summary: "Keep leases for leaseMs more from now (a long job)",
        requestBody: {
          required: true,
          content: jsonContent({
            type: "object",
            required: ["leases"],
            properties: { leases: leasesSchema, leaseMs: { type: "integer", minimum: 1, maximum: MAX_LEASE_MS } },
          }),
        },
        responses: answer("extended", {
          extended: {
            type: "array",
            items: { type: "object", required: ["lease", "leaseUntil"], properties: { lease: { type: "string" }, leaseUntil: { type: "integer" } } },
          },
          errors: errorsSchema,
        }),
      },
      handler: async (event, principal) => {
        const { queue, consumer } = consumerParams(event, principal);
        const input = await body(event.req);
        const form = await queueForm(ctx.registry, queue);
        const refs = tokens(input.leases, form);
        const leaseMs = intField(input, "leaseMs", 1, MAX_LEASE_MS);
        unknownFields(input, ["leases", "leaseMs"]);
        const slot = await form.leasing(consumer);
        const { done, errors } = leaseOutcomes(
          refs,
          await slot.extend(
            refs.map((r) => r.ref),
            leaseMs,
          ),
        );
        return json<ExtendResponse>({ extended: done.map(({ token, value }) => ({ lease: token, leaseUntil: value })), errors });
      },
    },
    {
      method: "POST",
      route: consumerRoute("backoff"),
      openapi: {
        operationId: "backOff",
        summary:
          "Back off: no leases to anyone for delayMs (a worker told to slow down, e.g. after a 429); running leases go on, lease requests wait (a long poll up to its timeout)",
        requestBody: {
          required: true,
          content: jsonContent({ type: "object", required: ["delayMs"], properties: { delayMs: { type: "integer", minimum: 0, maximum: MAX_LEASE_MS } } }),
        },
        responses: answer("backing off", { limitedUntil: { type: "integer", description: "Nothing is handed out before then (ms, the server's clock)" } }),
      },
      handler: async (event, principal) => {
        const { queue, consumer } = consumerParams(event, principal);
        const input = await body(event.req);
        const delayMs = intField(input, "delayMs", 0, MAX_LEASE_MS);
        if (delayMs === undefined) throw new ApiError(400, "E_BODY", `Expected "delayMs": how long no lease goes out, an integer from 0 to ${MAX_LEASE_MS}.`);
        unknownFields(input, ["delayMs"]);
        const form = await queueForm(ctx.registry, queue);
        const slot = await form.leasing(consumer);
        return json<BackOffResponse>({ limitedUntil: await slot.backOff(delayMs) });
      },
    },
    {
      method: "POST",
      route: "/api/v1/queues/:queue/redrive",
      openapi: {
        operationId: "redrive",
        summary: "Move dead letters back: from this dead-letter queue to `to`, or each to its origin queue; needs read on this queue and write on the targets",
        requestBody: {
          required: false,
          content: jsonContent({ type: "object", properties: { to: { type: "string" }, max: { type: "integer", minimum: 1, default: 1000 } } }),
        },
        responses: answer("moved", { moved: { type: "integer" } }),
      },
      handler: async (event, principal) => {
        const dlq = nameParam(event, "queue");
        authorize(principal, "read", dlq);
        const input = await body(event.req);
        const max = intField(input, "max", 1, 1_000_000) ?? 1000;
        if (input.to !== undefined && typeof input.to !== "string") throw new ApiError(400, "E_BODY", `Invalid to ${JSON.stringify(input.to)}: a queue name.`);
        unknownFields(input, ["to", "max"]);
        const to = input.to as string | undefined;
        if (to !== undefined) authorize(principal, "write", to);
        const moved = await redrive(await ctx.registry.driver(), dlq, to, {
          max,
          // The server's own writers (another would be refused: one writer per queue), rights checked first.
          writerFor: (queue) => {
            authorize(principal, "write", queue);
            return ctx.registry.writers.writer(queue);
          },
        });
        return json<RedriveResponse>({ moved });
      },
    },
  ];
}

// --- Internal helpers ---

/** A JSON object body; empty is `{}`. */
function parseBody(bytes: Uint8Array, request: Request): Record<string, unknown> {
  if (bytes.length === 0) return {};
  const type = mediaType(request.headers.get("content-type"));
  if (type !== "" && type !== "application/json") throw new ApiError(415, "E_MEDIA_TYPE", `Send a JSON body (application/json), not ${type}.`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(utf8Strict.decode(bytes));
  } catch {
    throw new ApiError(400, "E_BODY", "The body is not valid JSON.");
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) throw new ApiError(400, "E_BODY", "The body must be a JSON object.");
  return parsed as Record<string, unknown>;
}

function intField(input: Record<string, unknown>, name: string, min: number, max: number): number | undefined {
  const value = input[name];
  if (value === undefined) return undefined;
  if (!Number.isInteger(value) || (value as number) < min || (value as number) > max)
    throw new ApiError(400, "E_BODY", `Invalid ${name} ${JSON.stringify(value)}: use an integer from ${min} to ${max}.`);
  return value as number;
}

function unknownFields(input: Record<string, unknown>, known: string[]): void {
  const extra = Object.keys(input).find((key) => !known.includes(key));
  if (extra !== undefined) throw new ApiError(400, "E_BODY", `Unknown field ${JSON.stringify(extra)}: use ${known.join(", ")}.`);
}

interface Lease {
  token: string;
  ref: LeaseRef;
}

/** `leases`: 1..max tokens as the queue's form writes them ("p<k>:..." with its partition on a partitioned queue). */
function leaseTokens(value: unknown, max: number, form: QueueForm): Lease[] {
  if (!Array.isArray(value) || value.length === 0)
    throw new ApiError(400, "E_BODY", `Expected "leases": a non-empty list of lease tokens ${form.leaseTokenForm}, as given with each leased message.`);
  if (value.length > max) throw new ApiError(413, "E_TOO_LARGE", `Too many leases in one request: ${value.length}, the limit is ${max}.`);
  return value.map((token: unknown) => leaseOf(token, form));
}

/** One lease token as the queue's form writes it. */
function leaseOf(token: unknown, form: QueueForm): Lease {
  const bad = (why = "") =>
    new ApiError(400, "E_BODY", `Invalid lease ${JSON.stringify(token)}: expected ${form.leaseTokenForm}, as given with a leased message${why}.`);
  if (typeof token !== "string") throw bad();
  return { token, ref: form.leaseRef(token, bad) };
}

/** `results` of an ack body: by lease token, each of `leases` (so, in their order: undefined for none). */
function ackResults(value: unknown, leases: Lease[]): unknown[] | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== "object" || value === null || Array.isArray(value))
    throw new ApiError(400, "E_BODY", `Invalid results ${JSON.stringify(value)}: an object of a result (any JSON value) per lease token of "leases".`);
  const byToken = value as Record<string, unknown>;
  const stray = Object.keys(byToken).find((token) => !leases.some((lease) => lease.token === token));
  if (stray !== undefined)
    throw new ApiError(400, "E_BODY", `Invalid results: ${JSON.stringify(stray)} is not one of "leases"; a result is given by its lease's token.`);
  for (const [token, result] of Object.entries(byToken)) checkOutcome("result", result, ` (lease ${token})`);
  return leases.map((lease) => (Object.hasOwn(byToken, lease.token) ? byToken[lease.token] : undefined));
}

/** A result or progress value the engine would refuse (too large), refused as the body's fault before anything is acked. */
function checkOutcome(name: "result" | "progress", value: unknown, where = ""): void {
  try {
    outcomeValueJson(name, value);
  } catch (error) {
    if (VQueueError.isError(error) && error.code === "E_OPTION") throw new ApiError(400, "E_BODY", `${error.message}${where}`);
    throw error;
  }
}

/** Each lease's outcome: done, or an error item for a lease the engine refused (any other failure fails the request). */
function leaseOutcomes<T>(leases: Lease[], settled: Settled<T>[]): { done: { token: string; value: T }[]; errors: LeaseErrorJSON[] } {
  const done: { token: string; value: T }[] = [];
  const errors: LeaseErrorJSON[] = [];
  let failure: unknown;
  settled.forEach((outcome, i) => {
    const { token } = leases[i]!;
    if (outcome.ok) return void done.push({ token, value: outcome.value });
    const error = outcome.error;
    if (VQueueError.isError(error) && error.code === "E_LEASE") return void errors.push({ lease: token, code: error.code, message: error.message });
    failure ??= error;
    if (VQueueError.isError(error)) errors.push({ lease: token, code: error.code, message: error.message });
  });
  // Nothing done: the request failed as a whole (its status says how). Some done (a partitioned
  // queue: another partition's consumer failed or was handed over meanwhile): those are done and
  // must be answered so, or a client would take them for not acknowledged and wait for them forever.
  if (failure !== undefined && (done.length === 0 || !VQueueError.isError(failure))) throw failure;
  return { done, errors };
}

/** Whether the client asked for the binary lease framing. */
function acceptsLeaseBatch(accept: string | null): boolean {
  return !!accept && accept.split(",").some((part) => mediaType(part) === BATCH_CONTENT_TYPE);
}
