/**
 * Optional OpenTelemetry spans for produce and consume (docs/operating.md#tracing). `@opentelemetry/api`
 * is an optional peer: it is imported at app creation through a variable specifier, so that
 * bundlers (Nitro, Vite) leave it alone and installs without it work. Until it has loaded, and
 * forever when it is absent, `start` returns undefined at once: no allocation, no cost.
 */

/** The parts of `@opentelemetry/api` used here (its types are not a dependency of ours). */
interface OtelSpan {
  setAttribute(key: string, value: number | string): unknown;
  setStatus(status: { code: number; message?: string }): unknown;
  recordException(exception: unknown): unknown;
  end(): void;
}
interface OtelApi {
  trace: { getTracer(name: string, version?: string): { startSpan(name: string, options: object, context?: unknown): OtelSpan } };
  context: { active(): unknown };
  propagation: { extract(context: unknown, carrier: Headers, getter: object): unknown };
  SpanKind: { PRODUCER: number; CONSUMER: number };
  SpanStatusCode: { ERROR: number };
}

/** A span of ours, or undefined when tracing is off. */
export type TraceSpan = OtelSpan | undefined;

export type MessagingOperation = "send" | "receive";

const OTEL_API = "@opentelemetry/api";
let loading: Promise<OtelApi | undefined> | undefined;

/** Loads `@opentelemetry/api` once per process; undefined when it is not installed. */
export function loadOpenTelemetry(): Promise<OtelApi | undefined> {
  loading ??= import(/* @vite-ignore */ OTEL_API).then(
    (mod: OtelApi & { default?: OtelApi }) => (mod.trace ? mod : mod.default),
    () => undefined,
  );
  return loading;
}

// W3C trace context from the request's headers (`traceparent`), when a propagator is registered.
const headerGetter = {
  get: (headers: Headers, key: string) => headers.get(key) ?? undefined,
  keys: (headers: Headers) => [...headers.keys()],
};

/** The app's spans: messaging semantic conventions, `messaging.system` "v-queue". */
export class Tracing {
  #api: OtelApi | undefined;
  #tracer: ReturnType<OtelApi["trace"]["getTracer"]> | undefined;
  /** Resolves once `@opentelemetry/api` was looked for (loaded or not). */
  readonly ready: Promise<void>;

  constructor(version: string) {
    this.ready = loadOpenTelemetry().then((api) => {
      if (!api) return;
      this.#api = api;
      // A proxy tracer: it follows a provider registered later.
      this.#tracer = api.trace.getTracer("v-queue", version);
    });
  }

  /** Starts a `send` or `receive` span on `queue` (child of the request's trace context when `headers` carry one). */
  start(operation: MessagingOperation, queue: string, consumer?: string, headers?: Headers): TraceSpan {
    const tracer = this.#tracer;
    if (!tracer) return undefined;
    const api = this.#api!;
    const attributes: Record<string, string> = {
      "messaging.system": "v-queue",
      "messaging.operation.type": operation,
      "messaging.operation.name": operation,
      "messaging.destination.name": queue,
    };
    if (consumer !== undefined) attributes["messaging.consumer.group.name"] = consumer;
    const parent = headers ? api.propagation.extract(api.context.active(), headers, headerGetter) : undefined;
    const kind = operation === "send" ? api.SpanKind.PRODUCER : api.SpanKind.CONSUMER;
    return tracer.startSpan(`${operation} ${queue}`, { kind, attributes }, parent);
  }

  /**
   * Runs `run` in a span (`start`'s): ended with the message count `count` tells of its result,
   * or with the error it threw. Without OpenTelemetry it only runs `run`.
   */
  async traced<T>(
    operation: MessagingOperation,
    queue: string,
    consumer: string | undefined,
    headers: Headers | undefined,
    count: (result: T) => number,
    run: () => Promise<T>,
  ): Promise<T> {
    const span = this.start(operation, queue, consumer, headers);
    if (!span) return run();
    try {
      const result = await run();
      this.end(span, count(result));
      return result;
    } catch (error) {
      this.end(span, undefined, error);
      throw error;
    }
  }

  /** Ends a span: with the batch's message count, or with error status when `error` is given. */
  end(span: TraceSpan, count: number | undefined, error?: unknown): void {
    if (!span) return;
    if (count !== undefined) span.setAttribute("messaging.batch.message_count", count);
    if (error !== undefined) {
      span.recordException(error);
      span.setStatus({ code: this.#api!.SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
    }
    span.end();
  }
}
