/**
 * Group commit of a shared consumer's journal lines: lines given while a write runs go
 * together in the next one (one append, one fsync), and each caller's promise resolves once
 * its lines are written. After each write `after` runs (the floor moves, the journal is
 * folded) before the next write starts.
 */
export class GroupCommit {
  readonly #write: (lines: string) => Promise<void>;
  readonly #after: () => Promise<void>;
  #pending = "";
  #waiters: { done: () => void; fail: (error: unknown) => void }[] = [];
  #flushing: Promise<void> | undefined;

  constructor(write: (lines: string) => Promise<void>, after: () => Promise<void>) {
    this.#write = write;
    this.#after = after;
  }

  /** Writes `lines` ("" to only run `after`); `written` runs once they are, before the promise resolves. */
  add(lines: string, written?: () => void): Promise<void> {
    this.#pending += lines;
    const done = new Promise<void>((resolve, reject) =>
      this.#waiters.push({
        done: () => {
          written?.();
          resolve();
        },
        fail: reject,
      }),
    );
    this.#kick();
    return done;
  }

  /** Resolves once nothing is being written. */
  async idle(): Promise<void> {
    while (this.#flushing) await this.#flushing;
  }

  #kick(): void {
    if (this.#flushing) return;
    this.#flushing = this.#flush().finally(() => {
      this.#flushing = undefined;
      // Lines given after the last round looked for them, but before it ended.
      if (this.#waiters.length > 0) this.#kick();
    });
  }

  async #flush(): Promise<void> {
    while (this.#waiters.length > 0) {
      const lines = this.#pending;
      const waiters = this.#waiters;
      this.#pending = "";
      this.#waiters = [];
      try {
        if (lines) await this.#write(lines);
        for (const waiter of waiters) waiter.done();
        await this.#after();
      } catch (error) {
        // Settled already when the write succeeded and `after` failed: `after` runs again next round.
        for (const waiter of waiters) waiter.fail(error);
      }
    }
  }
}
