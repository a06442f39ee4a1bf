import { describe, expect, it } from "vitest";
import { VQueueClientError, createClient } from "../../client/index";
import { BATCH_CONTENT_TYPE, decodeBatch, encodeProduceBatch } from "../../protocol/binary";
import { ProtocolError } from "../../protocol/errors";
import { errorResponse } from "../../runtime/errors";

const thrown = (fn: () => unknown): unknown => {
  try {
    fn();
  } catch (error) {
    return error;
  }
  throw new Error("nothing thrown");
};

describe("a ProtocolError, as each side tells it", () => {
  it("the server: a bad request body, 400 E_BODY (413 E_TOO_LARGE for too many)", async () => {
    const logged: unknown[] = [];
    const logger = { error: (...args: unknown[]) => logged.push(args) };
    const bad = errorResponse(
      thrown(() => decodeBatch(new Uint8Array(3))),
      logger,
    );
    expect(bad.status).toBe(400);
    expect(await bad.json()).toEqual({ error: { code: "E_BODY", message: `Invalid ${BATCH_CONTENT_TYPE} body: shorter than its 8-byte header.` } });
    const many = errorResponse(
      thrown(() => decodeBatch(encodeProduceBatch(["a", "b"]), 1)),
      logger,
    );
    expect(many.status).toBe(413);
    expect(await many.json()).toEqual({ error: { code: "E_TOO_LARGE", message: "Too many messages in one request: 2, the limit is 1." } });
    expect(logged).toEqual([]);
  });

  it("the client: a malformed response, E_RESPONSE with the answer's status (not the server's 400)", async () => {
    const fetch = async () => new Response(new Uint8Array([1, 2, 3]), { headers: { "content-type": BATCH_CONTENT_TYPE } });
    const client = createClient({ baseURL: "http://vq.test", fetch });
    const error = await client.consume("q", "c", { format: "binary" }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(VQueueClientError);
    expect(error).toMatchObject({ status: 200, code: "E_RESPONSE" });
    expect((error as Error).message).toMatch(/shorter than its 8-byte header/);
    expect((error as Error).cause).toBeInstanceOf(ProtocolError);
  });
});
