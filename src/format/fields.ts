/** Little-endian fields of the payloads of v-queue's side files (storage/side-log.ts): written, then read back in the same order. */

/** Little-endian fields one after another, into one buffer that grows as needed (a frame per produce call: no buffer per field). */
export class FieldWriter {
  #buf = new Uint8Array(64);
  #view = new DataView(this.#buf.buffer);
  #size = 0;

  /** Room for `bytes` more: the offset to write them at. */
  #take(bytes: number): number {
    const at = this.#size;
    if (at + bytes > this.#buf.length) {
      const grown = new Uint8Array(Math.max(this.#buf.length * 2, at + bytes));
      grown.set(this.#buf.subarray(0, at));
      this.#buf = grown;
      this.#view = new DataView(grown.buffer);
    }
    this.#size = at + bytes;
    return at;
  }

  u8(value: number): this {
    const at = this.#take(1); // first: it may grow the buffer (and replace the view)
    this.#view.setUint8(at, value);
    return this;
  }

  u32(value: number): this {
    const at = this.#take(4); // first: it may grow the buffer (and replace the view)
    this.#view.setUint32(at, value, true);
    return this;
  }

  /** A number exactly (ids, times, positions: all below 2^53). */
  f64(value: number): this {
    const at = this.#take(8); // first: it may grow the buffer (and replace the view)
    this.#view.setFloat64(at, value, true);
    return this;
  }

  /** u32 length, then the bytes. */
  bytes(value: Uint8Array): this {
    this.u32(value.length);
    const at = this.#take(value.length);
    this.#buf.set(value, at);
    return this;
  }

  done(): Uint8Array {
    return this.#buf.slice(0, this.#size);
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
