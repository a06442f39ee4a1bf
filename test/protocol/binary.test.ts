import { describe, expect, it } from "vitest";
import {
  BATCH_HEADER,
  BATCH_MAGIC,
  RECORD_HEADER,
  decodeBatch,
  encodeBatch,
  encodeProduceBatch,
  decodeLeases,
  encodeLeases,
  leaseToken,
} from "../../protocol/binary";
import { ProtocolError } from "../../protocol/errors";

const encoder = new TextEncoder();

/** The ProtocolError `fn` throws (fails the test when it throws anything else, or nothing). */
function protocolError(fn: () => unknown): ProtocolError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(ProtocolError);
    return error as ProtocolError;
  }
  throw new Error("expected a ProtocolError");
}

describe("binary batch framing", () => {
  it("round-trips text, bytes and positions (offsets past 2^32 included)", () => {
    const bytes = new Uint8Array([0, 1, 2, 255]);
    const framed = encodeBatch([
      { type: "string", data: "héllo", size: encoder.encode("héllo").length, part: 1, seq: 7, offset: 0 },
      { type: "object", data: bytes, size: bytes.length, part: 2, seq: 1, offset: 2 ** 32 + 5 },
      { type: "string", data: encoder.encode("raw"), size: 3, part: 2, seq: 2, offset: 2 ** 40 },
    ]);
    expect(framed.length).toBe(BATCH_HEADER + 3 * RECORD_HEADER + 6 + 4 + 3);
    expect(new DataView(framed.buffer).getUint32(0, true)).toBe(BATCH_MAGIC);
    const records = decodeBatch(framed);
    expect(records).toEqual([
      { type: "string", data: "héllo", size: 6, part: 1, seq: 7, offset: 0 },
      { type: "object", data: bytes, size: 4, part: 2, seq: 1, offset: 2 ** 32 + 5 },
      { type: "string", data: "raw", size: 3, part: 2, seq: 2, offset: 2 ** 40 },
    ]);
  });

  it("frames a produce batch with zero positions and keeps a leading U+FEFF (data, not a BOM)", () => {
    const records = decodeBatch(encodeProduceBatch(["\uFEFFtext", new Uint8Array([9]), ""]));
    expect(records.map((r) => [r.type, r.data, r.part, r.seq, r.offset])).toEqual([
      ["string", "\uFEFFtext", 0, 0, 0],
      ["object", new Uint8Array([9]), 0, 0, 0],
      ["string", "", 0, 0, 0],
    ]);
    expect(decodeBatch(encodeProduceBatch([]))).toEqual([]);
  });

  it("refuses malformed input with a ProtocolError E_BODY", () => {
    const good = encodeProduceBatch(["abc", "de"]);
    const badType = good.slice();
    badType[BATCH_HEADER] = 0x58;
    const badUtf8 = encodeProduceBatch([new Uint8Array([0xff])]);
    badUtf8[BATCH_HEADER] = 0x53; // an O record marked S
    const cases: [Uint8Array, RegExp][] = [
      [new Uint8Array(4), /shorter than its 8-byte header/],
      [new Uint8Array(8), /does not start with "VQB1"/],
      [good.subarray(0, good.length - 1), /record 1 is cut off/],
      [good.subarray(0, BATCH_HEADER + 10), /count 2 does not fit/],
      [badType, /record 0 has type 0x58/],
      [badUtf8, /record 0 is marked text \('S'\) but is not valid UTF-8/],
      [new Uint8Array([...good, 0]), /1 bytes after the last record/],
    ];
    for (const [input, message] of cases) {
      const error = protocolError(() => decodeBatch(input));
      expect(error.code).toBe("E_BODY");
      expect(error.message).toMatch(/^Invalid application\/vnd\.v-queue\.batch body: /);
      expect(error.message).toMatch(message);
    }
  });

  it("refuses more messages than asked for with E_TOO_MANY, before decoding them", () => {
    const batch = encodeProduceBatch(["a", "b", "c"]);
    expect(decodeBatch(batch, 3)).toHaveLength(3);
    const error = protocolError(() => decodeBatch(batch.subarray(0, BATCH_HEADER + 1), 2));
    expect(error.code).toBe("E_TOO_MANY");
    expect(error.message).toBe("Too many messages in one request: 3, the limit is 2.");
  });

  it("tells a ProtocolError from another copy by its name and code", () => {
    const foreign = Object.assign(new Error("x"), { name: "ProtocolError", code: "E_BODY" });
    expect(ProtocolError.isError(foreign)).toBe(true);
    expect(ProtocolError.isError(new Error("x"))).toBe(false);
  });
});

describe("VQL1 and VQM1 lease answers", () => {
  it("round-trips text, bytes, the lease info per record and the server's clock; 64-bit offsets and leases", () => {
    const leases = [
      {
        type: "string" as const,
        data: "héllo",
        size: 6,
        part: 3,
        seq: 7,
        offset: 2 ** 33 + 5,
        lease: 2 ** 40 + 1,
        deliveries: 2,
        leaseUntil: 1_765_000_000_123,
      },
      { type: "object" as const, data: Uint8Array.from([0, 255]), size: 2, part: 0, seq: 1, offset: 0, lease: 1, deliveries: 1, leaseUntil: 1_765_000_000_000 },
    ];
    const { now, records } = decodeLeases(encodeLeases(leases, 1_764_999_999_999));
    expect(now).toBe(1_764_999_999_999);
    expect(records).toEqual(leases);
    expect(leaseToken(records[0]!)).toBe(`3.${2 ** 33 + 5}.${2 ** 40 + 1}`);
    expect(decodeLeases(encodeLeases([], 5))).toEqual({ now: 5, records: [] });
  });

  it("VQM1: a partitioned queue's leases carry their partition, and their tokens name it", () => {
    const leases = [
      { type: "string" as const, data: "a", size: 1, part: 2, seq: 4, offset: 90, lease: 7, deliveries: 1, leaseUntil: 1_765_000_000_000, partition: 11 },
      {
        type: "object" as const,
        data: Uint8Array.from([1]),
        size: 1,
        part: 0,
        seq: 1,
        offset: 0,
        lease: 8,
        deliveries: 3,
        leaseUntil: 1_765_000_000_001,
        partition: 0,
      },
    ];
    const buf = encodeLeases(leases, 42, true);
    expect(new TextDecoder().decode(buf.subarray(0, 4))).toBe("VQM1");
    const { now, records } = decodeLeases(buf);
    expect(now).toBe(42);
    expect(records).toEqual(leases);
    expect(records.map(leaseToken)).toEqual(["p11:2.90.7", "p0:0.0.8"]);
    // Cut inside the partition field of the last record.
    expect(() => decodeLeases(buf.subarray(0, buf.length - 3))).toThrow(expect.objectContaining({ code: "E_BODY" }));
  });

  it("refuses malformed answers with a ProtocolError E_BODY", () => {
    const good = encodeLeases([{ type: "string", data: "abc", size: 3, part: 0, seq: 1, offset: 0, lease: 1, deliveries: 1, leaseUntil: 1 }], 0);
    for (const bad of [good.subarray(0, 10), good.subarray(0, good.length - 1), Uint8Array.from([...good, 0]), Uint8Array.from(good).fill(0, 0, 4)]) {
      expect(() => decodeLeases(bad)).toThrow(expect.objectContaining({ code: "E_BODY" }));
    }
  });
});
