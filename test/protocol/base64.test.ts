import { describe, expect, it, vi } from "vitest";
import * as withBuffer from "../../protocol/base64";

/** The module as a browser loads it: no Node Buffer, so btoa/atob. */
async function withoutBuffer(): Promise<typeof withBuffer> {
  const saved = globalThis.Buffer;
  vi.resetModules();
  try {
    // @ts-expect-error taken away while the module loads (it looks once)
    delete globalThis.Buffer;
    return await import("../../protocol/base64");
  } finally {
    globalThis.Buffer = saved;
  }
}

const same = (a: Uint8Array | undefined, b: Uint8Array) => a !== undefined && a.length === b.length && a.every((x, i) => x === b[i]);

describe.each([
  ["with Buffer (Node)", async () => withBuffer, false],
  ["without Buffer (browsers)", withoutBuffer, true],
])("base64 %s", (_name, load, fallback) => {
  it("encodes and decodes standard base64 with padding", async () => {
    const { fromBase64, toBase64 } = await load();
    const btoa = vi.spyOn(globalThis, "btoa");
    expect(toBase64(new Uint8Array([0]))).toBe("AA==");
    expect(btoa).toHaveBeenCalledTimes(fallback ? 1 : 0);
    btoa.mockRestore();
    expect(toBase64(new Uint8Array([0xfb, 0xff]))).toBe("+/8=");
    expect(toBase64(new Uint8Array([1, 2, 3]))).toBe("AQID");
    for (const bytes of [new Uint8Array(0), new Uint8Array([0]), new Uint8Array([0xfb, 0xff]), new Uint8Array([1, 2, 3])]) {
      expect(fromBase64(toBase64(bytes))).toEqual(bytes);
    }
  });

  it("encodes a view, not its whole buffer", async () => {
    const { toBase64 } = await load();
    expect(toBase64(new Uint8Array([9, 1, 2, 3, 9]).subarray(1, 4))).toBe("AQID");
  });

  it("round-trips a large body (the fallback goes in chunks)", async () => {
    const { fromBase64, toBase64 } = await load();
    const big = new Uint8Array(100_000).map((_, i) => i * 31);
    expect(same(fromBase64(toBase64(big)), big)).toBe(true);
  });

  it("gives undefined for what is not standard padded base64", async () => {
    const { fromBase64 } = await load();
    for (const bad of ["AQI", "AQ=D", "A-_=", "AQID=", "@@@@", "AQ==AQ=="]) expect(fromBase64(bad)).toBeUndefined();
  });
});
