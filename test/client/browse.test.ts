import { describe, expect, it } from "vitest";
import { createClient, VQueueClientError, type BrowseResult } from "../../client/index";
import { startServer } from "../http/_server";

describe("client: browse", () => {
  it("pages through a queue without any consumer: text, parsed JSON, bytes; every kind of start", async () => {
    const s = await startServer();
    const vq = createClient({ baseURL: s.url });
    await vq.produce("q", ["a", { n: 1 }, new Uint8Array([0, 255])]);
    const first: BrowseResult = await vq.browse("q", { limit: 2 });
    expect(first.messages.map((m) => m.data)).toEqual(["a", '{"n":1}']);
    expect(first.next).toBe(first.messages[1]!.cursor);
    const rest = await vq.browse("q", { from: first.next! });
    expect(rest.messages.map((m) => m.data)).toEqual([new Uint8Array([0, 255])]);
    expect(rest.next).toBeNull();
    const parsed = await vq.browse<{ n: number }>("q", { from: { part: 0, seq: 2 }, limit: 1, json: true });
    const message = parsed.messages[0]!;
    expect(message.type === "string" && message.json === true && message.data.n).toBe(1);
    expect((await vq.browse("q", { from: "latest", limit: 1 })).messages.map((m) => m.seq)).toEqual([3]);
    expect((await vq.browse("q", { from: { time: new Date(Date.now() - 60_000) } })).messages).toHaveLength(3);
    expect((await vq.browse("q", { maxBytes: 1 })).messages).toHaveLength(1);
    expect((await vq.consumers("q")).consumers).toEqual([]);
    const error = await vq.browse("q", { limit: 5000 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(VQueueClientError);
    expect(error).toMatchObject({ status: 400, code: "E_PARAM" });
    await expect(vq.browse("absent")).rejects.toMatchObject({ status: 404, code: "E_NOT_FOUND" });
  });
});
