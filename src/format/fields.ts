/** Little-endian fields of the payloads of v-queue's side files (storage/side-log.ts): written, then read back in the same order. */

/** Little-endian fields one after another. */
export class FieldWriter {
  #parts: Uint8Array[] = [];
  #size = 0;

  #push(bytes: Uint8Array): this {
    this.#parts.push(bytes);
    this.#size += bytes.length;
    return this;
  }

  u8(value: number): this {
    return this.#push(Uint8Array.of(value));
  }

  u32(value: number): this {
    const b = new Uint8Array(4);
    new DataView(b.buffer).setUint32(0, value, true);
    return this.#push(b);
  }

  /** A number exactly (ids, times, positions: all below 2^53). */
  f64(value: number): this {
    const b = new Uint8Array(8);
    new DataView(b.buffer).setFloat64(0, value, true);
    return this.#push(b);
  }

  /** u32 length, then the bytes. */
  bytes(value: Uint8Array): this {
    return this.u32(value.length).#push(value);
  }

  done(): Uint8Array {
    const out = new Uint8Array(this.#size);
    let at = 0;
    for (const p of this.#parts) {
      out.set(p, at);
      at += p.length;
    }
    return out;
  }
}

/** Reads what `FieldWriter` wrote, in the same order. */
export class FieldReader {
  #view: DataView;
  at = 0;

  constructor(readonly buf: Uint8Array) {
    this.#view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  }

  u8(): number {
    return this.#view.getUint8(this.at++);
  }

  u32(): number {
    const v = this.#view.getUint32(this.at, true);
    this.at += 4;
    return v;
  }

  f64(): number {
    const v = this.#view.getFloat64(this.at, true);
    this.at += 8;
    return v;
  }

  bytes(): Uint8Array {
    const length = this.u32();
    const v = this.buf.subarray(this.at, this.at + length);
    this.at += length;
    return v;
  }
}
