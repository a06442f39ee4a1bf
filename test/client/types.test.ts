import { describe, expect, expectTypeOf, it } from "vitest";
import {
  createClient,
  type ClientMessage,
  type ConsumeOptions,
  type ConsumeResult,
  type JsonValue,
  type MessageJSON,
  type ProduceMessage,
  type SubscribeOptions,
} from "../../client/index";

/**
 * The client's public types. Checked by `npm run typecheck` (tsc covers test/): an
 * `expectTypeOf` that no longer holds, or a `@ts-expect-error` line that compiles, fails CI.
 * The calls also run, against a stubbed fetch, so each one is a real use of the API.
 */

interface Order {
  id: number;
  item: string;
  note?: string;
}

const MESSAGES: MessageJSON[] = [
  { part: 0, offset: 0, seq: 1, type: "string", data: '{"id":1,"item":"book"}', cursor: "0.43.1" },
  { part: 0, offset: 43, seq: 2, type: "string", data: "not json", cursor: "0.72.2" },
  { part: 0, offset: 72, seq: 3, type: "object", data: "AAH/", encoding: "base64", cursor: "0.96.3" },
];

/** A client whose server answers every consume with MESSAGES and every produce with one position. */
function stubClient() {
  const answer = (body: unknown) => new Response(JSON.stringify(body), { headers: { "content-type": "application/json" } });
  return createClient({
    baseURL: "http://vq.test",
    fetch: async (_input, init) => {
      if (init?.method === "POST") return answer({ queue: "q", count: 1, first: { part: 0, offset: 0, seq: 1 }, last: { part: 0, offset: 0, seq: 1 } });
      return answer({ queue: "q", consumer: "c", count: MESSAGES.length, cursor: MESSAGES.at(-1)!.cursor, messages: MESSAGES });
    },
  });
}

describe("ClientMessage is a discriminated union that narrows", () => {
  it("has data of string | Uint8Array, not unknown", () => {
    expectTypeOf<ClientMessage["data"]>().toEqualTypeOf<string | Uint8Array>();
    expectTypeOf<ClientMessage["type"]>().toEqualTypeOf<"string" | "object">();
    expectTypeOf<ConsumeResult["messages"]>().toEqualTypeOf<ClientMessage[]>();
  });

  it("narrows data on type", async () => {
    const { messages } = await stubClient().consume("q", "c", { maxMessages: 3 });
    expectTypeOf(messages).toEqualTypeOf<ClientMessage[]>();
    const texts: string[] = [];
    for (const m of messages) {
      if (m.type === "string") {
        expectTypeOf(m.data).toEqualTypeOf<string>();
        texts.push(m.data.toUpperCase());
      } else {
        expectTypeOf(m.data).toEqualTypeOf<Uint8Array>();
        expect(m.data.byteLength).toBe(3);
      }
      // @ts-expect-error not narrowed yet: text or bytes
      const text: string = m.data;
      expect(text).toBeDefined();
      // Without `json: true` nothing is parsed.
      expectTypeOf(m.json).toEqualTypeOf<undefined>();
      expect(m.json).toBeUndefined();
    }
    expect(texts).toEqual(['{"ID":1,"ITEM":"BOOK"}', "NOT JSON"]);
  });

  it("types parsed messages with consume<T>(..., { json: true }), no cast", async () => {
    const { messages } = await stubClient().consume<Order>("q", "c", { maxMessages: 3, json: true });
    expectTypeOf(messages).toEqualTypeOf<ClientMessage<Order>[]>();
    const [parsed, text, bytes] = messages;
    for (const m of messages) {
      // @ts-expect-error not narrowed yet: a parsed Order, text that is not JSON, or bytes
      const order: Order = m.data;
      expect(order).toBeDefined();
      if (m.json) {
        expectTypeOf(m.data).toEqualTypeOf<Order>();
        expectTypeOf(m.type).toEqualTypeOf<"string">();
      } else if (m.type === "string") {
        // Text that is not JSON comes as it is, with the parse error: the batch does not fail.
        expectTypeOf(m.data).toEqualTypeOf<string>();
        expectTypeOf(m.error).toEqualTypeOf<SyntaxError>();
      } else {
        expectTypeOf(m.data).toEqualTypeOf<Uint8Array>();
      }
      if (m.type === "string") expectTypeOf(m.data).toEqualTypeOf<Order | string>();
    }
    expect(parsed).toMatchObject({ type: "string", json: true, data: { id: 1, item: "book" } });
    expect(text).toMatchObject({ type: "string", json: false, data: "not json", error: expect.any(SyntaxError) });
    expect(bytes).toMatchObject({ type: "object", data: Uint8Array.from([0, 1, 255]) });
  });

  it("asks for json: true to type what is parsed", async () => {
    const client = stubClient();
    // @ts-expect-error a parsed type without `json: true`: nothing would be parsed
    await client.consume<Order>("q", "c");
    // @ts-expect-error the same for subscribe
    client.subscribe<Order>("q", "c");
    // A `json` only known at run time: either kind of message.
    const json = MESSAGES.length > 1;
    const result = await client.consume<Order>("q", "c", { json });
    expectTypeOf(result).toEqualTypeOf<ConsumeResult<Order> | ConsumeResult>();
    for (const m of result.messages) if (m.json) expectTypeOf(m.data).toEqualTypeOf<Order>();
    // Options typed as ConsumeOptions (`json?: boolean`) are fine too.
    const options: ConsumeOptions = { maxMessages: 2 };
    expectTypeOf(await client.consume("q", "c", options)).toEqualTypeOf<ConsumeResult<unknown> | ConsumeResult>();
    const subscribeOptions: SubscribeOptions = { maxMessages: 2 };
    expectTypeOf(client.subscribe("q", "c", subscribeOptions)).toEqualTypeOf<AsyncGenerator<ClientMessage<unknown> | ClientMessage, void, undefined>>();
  });

  it("types subscribe's messages the same way", () => {
    const client = stubClient();
    expectTypeOf(client.subscribe("q", "c")).toEqualTypeOf<AsyncGenerator<ClientMessage, void, undefined>>();
    expectTypeOf(client.subscribe<Order>("q", "c", { json: true })).toEqualTypeOf<AsyncGenerator<ClientMessage<Order>, void, undefined>>();
    expectTypeOf(client.subscribe("q", "c", { json: true })).toEqualTypeOf<AsyncGenerator<ClientMessage<unknown>, void, undefined>>();
  });
});

describe("produce takes text, bytes and JSON values, and nothing else", () => {
  it("accepts strings, bytes, JSON values, interfaces of them, and batches", async () => {
    const client = stubClient();
    const order: Order = { id: 1, item: "book" };
    const json: JsonValue = { a: [1, null, { b: true }] };
    const annotated: ProduceMessage[] = ["x", new Uint8Array(1), json];
    const batch = ["text", order, 42, null, true, [1, "two"], new Uint8Array([1]), new ArrayBuffer(2)] as const;
    for (const input of [order, json, annotated, batch, [order, order], "text", 0, false, null] as const) {
      expect((await client.produce("q", input)).count).toBe(1);
    }
    await client.produce("q", { id: 1, item: "book", note: undefined });
    await client.produce("q", [[1, 2]]);
  });

  it("refuses what is not text, bytes or JSON", async () => {
    const client = stubClient();
    const refused = (promise: Promise<unknown>) => expect(promise).rejects.toBeInstanceOf(TypeError);
    // @ts-expect-error a Date is not a JSON value
    await refused(client.produce("q", new Date()));
    // @ts-expect-error nor inside one
    await refused(client.produce("q", [{ id: 1, at: new Date() }]));
    // @ts-expect-error undefined is no message
    await refused(client.produce("q", undefined));
    // @ts-expect-error a function
    await refused(client.produce("q", () => 1));
    // @ts-expect-error a bigint
    await refused(client.produce("q", 1n));
    // @ts-expect-error a Map (it would go as `{}`)
    await refused(client.produce("q", new Map([["a", 1]])));
    // @ts-expect-error bytes inside JSON (they would go as `{"0":1}`)
    await refused(client.produce("q", { bytes: new Uint8Array([1]) }));
    // @ts-expect-error undefined in a JSON array (it would go as null)
    await refused(client.produce("q", [[1, undefined]]));
    // @ts-expect-error unknown: check what it is first
    await refused(client.produce("q", undefined as unknown));
  });
});
