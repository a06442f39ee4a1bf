import { close, closeSync, fdatasync, fstat, ftruncate, open, openSync, read, write } from "node:fs";
import { promisify } from "node:util";

const openAsync = promisify(open);
const closeAsync = promisify(close);
const readAsync = promisify(read);
const writeAsync = promisify(write);
const ftruncateAsync = promisify(ftruncate);
const fdatasyncAsync = promisify(fdatasync);
const fstatAsync = promisify(fstat);

/** Opens `full` with `flags` (`mode`: a file it creates): on the calling thread when `inline` (an open against a local disk takes microseconds), else in the pool. */
export async function openDescriptor(full: string, flags: number, inline: boolean, mode = 0o644): Promise<Descriptor> {
  return new Descriptor(inline ? openSync(full, flags, mode) : await openAsync(full, flags, mode), inline);
}

/**
 * A file descriptor with the few calls of `fs/promises`' FileHandle the fs driver makes, opened
 * and closed on the calling thread when `inline` (a FileHandle only opens and closes through the
 * thread pool). Like a FileHandle, its close waits for the calls in flight in the pool, and a
 * closed one refuses every call: a number closed under a read could be reused by the next open,
 * and the read would land in another file.
 */
export class Descriptor {
  readonly #fd: number;
  readonly #inline: boolean;
  #inFlight = 0;
  #settled: (() => void) | undefined;
  #closing: Promise<void> | undefined;

  constructor(fd: number, inline: boolean) {
    this.#fd = fd;
    this.#inline = inline;
  }

  /** The number, for synchronous calls; EBADF once closing. */
  get fd(): number {
    if (this.#closing) throw Object.assign(new Error("EBADF: file closed"), { code: "EBADF" });
    return this.#fd;
  }

  read(buffer: Uint8Array, offset: number, length: number, position: number): Promise<{ bytesRead: number }> {
    return this.#pool(readAsync(this.fd, buffer, offset, length, position));
  }

  write(data: Uint8Array, offset: number, length: number, position: number): Promise<{ bytesWritten: number }> {
    return this.#pool(writeAsync(this.fd, data, offset, length, position));
  }

  truncate(length: number): Promise<void> {
    return this.#pool(ftruncateAsync(this.fd, length));
  }

  datasync(): Promise<void> {
    return this.#pool(fdatasyncAsync(this.fd));
  }

  stat(): Promise<{ size: number }> {
    return this.#pool(fstatAsync(this.fd));
  }

  /** Closes once the calls in flight are done; a second close is the first's. */
  close(): Promise<void> {
    return (this.#closing ??= this.#close());
  }

  async #close(): Promise<void> {
    if (this.#inFlight > 0) await new Promise<void>((resolve) => (this.#settled = resolve));
    if (this.#inline) closeSync(this.#fd);
    else await closeAsync(this.#fd);
  }

  async #pool<T>(call: Promise<T>): Promise<T> {
    this.#inFlight++;
    try {
      return await call;
    } finally {
      if (--this.#inFlight === 0) this.#settled?.();
    }
  }
}
