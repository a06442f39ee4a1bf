import { context, propagation, SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { afterAll, beforeEach, describe, expect, it } from "vitest";
import { jsonHeaders, startServer } from "./_server";
import { loadOpenTelemetry, Tracing } from "../../runtime/tracing";

// A real SDK registered globally, as an app would: the spans land in memory.
const exporter = new InMemorySpanExporter();
trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }));
propagation.setGlobalPropagator(new W3CTraceContextPropagator());
afterAll(() => {
  trace.disable();
  propagation.disable();
  context.disable();
});
beforeEach(() => exporter.reset());

const spans = (): ReadableSpan[] => exporter.getFinishedSpans();

describe("OpenTelemetry spans (when @opentelemetry/api is installed)", () => {
  it("makes a send span per produce and a receive span per consume and lease, with the messaging attributes", async () => {
    const s = await startServer();
    await loadOpenTelemetry(); // the app's tracer is set once the import resolved
    expect((await s.post("/api/v1/queues/orders/messages", JSON.stringify({ messages: ["a", "b"] }), jsonHeaders)).status).toBe(201);
    expect((await (await s.get("/api/v1/queues/orders/consumers/c/messages?max_messages=10")).json()).count).toBe(2);
    const leased = await (await s.post("/api/v1/queues/orders/consumers/w/lease", JSON.stringify({ max: 1 }), jsonHeaders)).json();
    expect(leased.messages).toHaveLength(1);

    const [send, receive, lease] = spans();
    expect(spans()).toHaveLength(3);
    expect(send!.name).toBe("send orders");
    expect(send!.kind).toBe(SpanKind.PRODUCER);
    expect(send!.attributes).toEqual({
      "messaging.system": "v-queue",
      "messaging.operation.type": "send",
      "messaging.operation.name": "send",
      "messaging.destination.name": "orders",
      "messaging.batch.message_count": 2,
    });
    expect(send!.status.code).toBe(SpanStatusCode.UNSET);
    expect(receive!.name).toBe("receive orders");
    expect(receive!.kind).toBe(SpanKind.CONSUMER);
    expect(receive!.attributes).toMatchObject({
      "messaging.operation.type": "receive",
      "messaging.destination.name": "orders",
      "messaging.consumer.group.name": "c",
      "messaging.batch.message_count": 2,
    });
    expect(lease!.attributes).toMatchObject({
      "messaging.operation.type": "receive",
      "messaging.consumer.group.name": "w",
      "messaging.batch.message_count": 1,
    });
    expect(send!.instrumentationScope.name).toBe("v-queue");
  });

  it("marks a failed produce or consume as an error", async () => {
    const s = await startServer();
    await loadOpenTelemetry();
    expect((await s.post("/api/v1/queues/orders/messages", "{not json", jsonHeaders)).status).toBe(400);
    expect((await s.get("/api/v1/queues/missing/consumers/c/messages")).status).toBe(404);
    const [send, receive] = spans();
    expect(send!.status.code).toBe(SpanStatusCode.ERROR);
    expect(send!.status.message).toContain("not valid JSON");
    expect(send!.attributes["messaging.batch.message_count"]).toBeUndefined();
    expect(send!.events.map((e) => e.name)).toEqual(["exception"]);
    expect(receive!.status.code).toBe(SpanStatusCode.ERROR);
  });

  it("continues the caller's trace (traceparent) and traces handler.push and handler.produce", async () => {
    const s = await startServer();
    await loadOpenTelemetry();
    const traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
    const traceparent = `00-${traceId}-00f067aa0ba902b7-01`;
    await s.post("/api/v1/queues/orders/messages", "one", { "content-type": "text/plain", traceparent });
    await s.handler.push("orders", ["x", "y", "z"]);
    await s.handler.produce("orders", "later", { delayMs: 60_000 });
    const [http, push, produce] = spans();
    expect(http!.spanContext().traceId).toBe(traceId);
    expect(http!.parentSpanContext?.spanId).toBe("00f067aa0ba902b7");
    expect(push!.name).toBe("send orders");
    expect(push!.attributes["messaging.batch.message_count"]).toBe(3);
    expect(produce!.attributes["messaging.batch.message_count"]).toBe(1);
  });

  it("gives no span (and allocates none) before the API has loaded", () => {
    const tracing = new Tracing("0");
    expect(tracing.start("send", "q")).toBeUndefined();
    tracing.end(undefined, 1); // a no-op
  });
});
