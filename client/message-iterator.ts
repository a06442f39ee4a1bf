/**
 * An async generator of the messages of a generator of batches: `subscribe`'s loop. An async
 * generator that yields each message itself costs three promises and as many microtask turns per
 * message (a `yield` in an async generator awaits), about as much as decoding it; this one hands
 * out the messages of the batch in hand with one resolved promise each, and asks the batches for
 * more only when the batch is used up. Calls are taken one at a time, in order, as a generator's.
 */
export class MessageIterator<T> implements AsyncGenerator<T, void, undefined> {
  readonly #batches: AsyncGenerator<T[], void, undefined>;
  readonly #finished: (message: T) => Promise<void> | undefined;
  readonly #stop: () => boolean;
  #batch: T[] = [];
  #next = 0;
  #ended = false;
  /** Calls not answered yet: a call waits for those before it (`#tail`). */
  #busy = 0;
  #tail: Promise<unknown> = Promise.resolve();

  /**
   * `finished(message)`: the loop is done with the message it was given last (it asked for the
   * next one); a promise returned is awaited before the next message. `stop()`: whether to end
   * before the next message (asked after `finished`).
   */
  constructor(batches: AsyncGenerator<T[], void, undefined>, finished: (message: T) => Promise<void> | undefined, stop: () => boolean) {
    this.#batches = batches;
    this.#finished = finished;
    this.#stop = stop;
  }

  next(): Promise<IteratorResult<T, void>> {
    // The common case, one message after another from the batch in hand: no chaining.
    if (this.#busy === 0 && !this.#ended && this.#next > 0 && this.#next < this.#batch.length) {
      const finishing = this.#finished(this.#batch[this.#next - 1]!);
      if (finishing === undefined && !this.#stop()) return Promise.resolve({ value: this.#batch[this.#next++]!, done: false });
      return this.#serial(() => this.#afterFinished(finishing));
    }
    return this.#serial(async () => {
      if (this.#ended) return { value: undefined, done: true };
      return this.#next > 0 ? this.#afterFinished(this.#finished(this.#batch[this.#next - 1]!)) : this.#take();
    });
  }

  /** Once the message handed out last is finished: the end (`stop()`), or the next message. */
  async #afterFinished(finishing: Promise<void> | undefined): Promise<IteratorResult<T, void>> {
    await finishing;
    return this.#stop() ? this.#end() : this.#take();
  }

  /** Ends the loop (a `break` or a `return` in a for-await body): the batches' `finally` runs. */
  return(): Promise<IteratorResult<T, void>> {
    return this.#serial(() => this.#end());
  }

  /** Ends the loop, then throws `error` (as a generator that does not catch it). */
  throw(error: unknown): Promise<IteratorResult<T, void>> {
    return this.#serial(async () => {
      await this.#end();
      throw error;
    });
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.return();
  }

  /** The next message of the batch in hand, or of the next batch that has one. */
  async #take(): Promise<IteratorResult<T, void>> {
    while (this.#next >= this.#batch.length) {
      // Not one of this batch's messages is handed out again: the last one was finished above.
      this.#batch = [];
      this.#next = 0;
      const result = await this.#batches.next().catch(async (error: unknown) => {
        this.#ended = true;
        throw error;
      });
      if (result.done) {
        this.#ended = true;
        return { value: undefined, done: true };
      }
      this.#batch = result.value;
    }
    return { value: this.#batch[this.#next++]!, done: false };
  }

  async #end(): Promise<IteratorResult<T, void>> {
    if (!this.#ended) {
      this.#ended = true;
      this.#batch = [];
      await this.#batches.return();
    }
    return { value: undefined, done: true };
  }

  #serial<R>(run: () => Promise<R>): Promise<R> {
    // Counted down as the call's answer settles, so the loop's next call finds none running.
    const counted = async () => {
      try {
        return await run();
      } finally {
        this.#busy--;
      }
    };
    const result = this.#busy++ === 0 ? counted() : this.#tail.then(counted);
    this.#tail = result.catch(() => undefined);
    return result;
  }
}
