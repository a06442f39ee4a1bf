/**
 * Group commit of a shared consumer's journal: lines and items (acknowledged entries) given
 * while a write runs go together in the next one (one append, one fsync); every caller of a
 * round gets the round's one promise, resolved once its write is done. After each write
 * `after` runs (the floor moves, the journal is folded) before the next write starts.
 */
export interface GroupCommitHooks<T> {
  /** Writes a round: its lines, then what its items render to. */
  write: (lines: string, items: T[]) => Promise<void>;
  /** The round is written: runs before its promise resolves. */
  written: (items: T[]) => void;
  /** The round's write failed: runs before its promise rejects. */
  failed: (items: T[]) => void;
  after: () => Promise<void>;
}

interface Round<T> {
  lines: string;
  items: T[];
  promise: Promise<void>;
  resolve: () => void;
  reject: (error: unknown) => void;
}

export class GroupCommit<T> {
  readonly #hooks: GroupCommitHooks<T>;
  #next: Round<T> | undefined;
  #flushing: Promise<void> | undefined;

  constructor(hooks: GroupCommitHooks<T>) {
    this.#hooks = hooks;
  }

  /** Writes `lines` and `items` ("" and none: only runs `after`); resolves once they are written. */
  add(lines: string, items?: readonly T[]): Promise<void> {
    const round = (this.#next ??= GroupCommit.#round());
    round.lines += lines;
    if (items) for (const item of items) round.items.push(item);
    this.#kick();
    return round.promise;
  }

  /** Resolves once nothing is being written. */
  async idle(): Promise<void> {
    while (this.#flushing) await this.#flushing;
  }

  static #round<T>(): Round<T> {
    let resolve!: () => void;
    let reject!: (error: unknown) => void;
    const promise = new Promise<void>((res, rej) => ((resolve = res), (reject = rej)));
    // Callers may not all look at it (an empty round to run `after`): no unhandled rejection.
    promise.catch(() => {});
    return { lines: "", items: [], promise, resolve, reject };
  }

  #kick(): void {
    if (this.#flushing) return;
    this.#flushing = this.#flush().finally(() => {
      this.#flushing = undefined;
      // Given after the last round looked for them, but before it ended.
      if (this.#next) this.#kick();
    });
  }

  async #flush(): Promise<void> {
    while (this.#next) {
      const round = this.#next;
      this.#next = undefined;
      try {
        if (round.lines || round.items.length > 0) await this.#hooks.write(round.lines, round.items);
      } catch (error) {
        this.#hooks.failed(round.items);
        round.reject(error);
        continue;
      }
      this.#hooks.written(round.items);
      round.resolve();
      // A failure here fails no caller: `after` runs again next round.
      await this.#hooks.after().catch(() => {});
    }
  }
}
