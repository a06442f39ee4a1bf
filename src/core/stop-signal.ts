/**
 * A stop flag with "abort" listeners: the part of `AbortSignal` that v-queue's long-lived objects
 * read (`aborted`, `reason`, add and remove a listener). Plain JavaScript on purpose: workerd ties
 * every AbortController to the request that made it ("Cannot perform I/O on behalf of a different
 * request"), so a signal that outlives a request (a lock's `lost`, a consumer slot's stop) must
 * not be one. An `AbortSignal` fits this type too.
 */
export interface StopSignalLike {
  readonly aborted: boolean;
  readonly reason: unknown;
  addEventListener(type: "abort", listener: () => void, options?: { once?: boolean }): void;
  removeEventListener(type: "abort", listener: () => void): void;
}

export class StopSignal implements StopSignalLike {
  #aborted = false;
  #reason: unknown;
  #listeners = new Set<() => void>();

  get aborted(): boolean {
    return this.#aborted;
  }

  get reason(): unknown {
    return this.#reason;
  }

  addEventListener(_type: "abort", listener: () => void): void {
    if (!this.#aborted) this.#listeners.add(listener);
  }

  removeEventListener(_type: "abort", listener: () => void): void {
    this.#listeners.delete(listener);
  }

  /**
   * Stops it once (later calls are no-ops) and calls each listener once, every one even when one
   * throws (a lost lock's listeners stop a writer, count it, let a partition go: one's failure
   * must not skip the others); then throws the first listener's error, if any.
   */
  abort(reason: unknown = new Error("Stopped.")): void {
    if (this.#aborted) return;
    this.#aborted = true;
    this.#reason = reason;
    const listeners = [...this.#listeners];
    this.#listeners.clear();
    let failed: { error: unknown } | undefined;
    for (const listener of listeners) {
      try {
        listener();
      } catch (error) {
        failed ??= { error };
      }
    }
    if (failed) throw failed.error;
  }
}
