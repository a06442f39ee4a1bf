/**
 * A shared consumer of an ordinary queue that another instance holds, as this server's requests
 * meet it: a lease takes the consumer here (by request, handover-slot.ts); an ack, nack or extend
 * (or a back-off) goes to the consumer's inbox (consumers/state/ack-inbox.ts) and is answered with the holder's
 * verdict (`E_PENDING` when none comes in time). Taking the consumer for it would wait on a
 * hand-over that waits for that very ack (the holder lets go once its leases are acked).
 */
import { verdictError, type InboxPost, type InboxPoster, type Verdict } from "../src/consumers/state/ack-inbox";
import { MAX_ERROR_CHARS } from "../src/consumers/shared/consumer";
import type { LeasedMessage, LeaseRef, NackOptions } from "../src/consumers/types";
import { outcomeValueJson } from "../src/format/outcome";
import type { LeasingSlot, Settled, SharedSlot, SlotStats } from "./shared-slot";

export class ElsewhereSharedSlot implements LeasingSlot {
  readonly kind = "shared";

  constructor(
    private readonly queue: string,
    private readonly name: string,
    private readonly inbox: InboxPoster,
    /** The consumer's lease time: what an extend without one gives. */
    private readonly leaseMs: number,
    /** The consumer, taken here. */
    private readonly take: () => Promise<SharedSlot>,
  ) {}

  async lease(options: { max: number; maxBytes: number; leaseMs?: number; timeoutMs: number; signal?: AbortSignal }): Promise<LeasedMessage[]> {
    return (await this.take()).lease(options);
  }

  /** Its stats are where it is held: it is taken here for them. */
  async readStats(): Promise<SlotStats> {
    return (await this.take()).stats;
  }

  ack(refs: LeaseRef[], results?: unknown[]): Promise<Settled<void>[]> {
    return this.#post(
      refs.map((ref, i) => ({ kind: "ack", ref: refOf(ref), result: outcomeValueJson("result", results?.[i]) })),
      () => undefined,
    );
  }

  /** Through the inbox: the holder checks the lease and keeps the update. */
  async progress(ref: LeaseRef, progress: unknown): Promise<void> {
    const [settled] = await this.#post([{ kind: "progress", ref: refOf(ref), progress: outcomeValueJson("progress", progress)! }], () => undefined);
    if (!settled!.ok) throw settled!.error;
  }

  nack(refs: LeaseRef[], options: NackOptions): Promise<Settled<void>[]> {
    const { delayMs, defaultDelayMs, release = false, deadLetter = false, error } = options;
    return this.#post(
      refs.map((ref) => ({
        kind: "nack",
        ref: refOf(ref),
        delayMs,
        defaultDelayMs,
        release,
        deadLetter,
        error: error === undefined ? undefined : String(error).slice(0, MAX_ERROR_CHARS),
      })),
      () => undefined,
    );
  }

  extend(refs: LeaseRef[], leaseMs: number | undefined): Promise<Settled<number>[]> {
    const until = Date.now() + (leaseMs ?? this.leaseMs);
    return this.#post(
      refs.map((ref) => ({ kind: "extend", ref: refOf(ref), until })),
      (verdict) => verdict.until ?? until,
    );
  }

  /** Through the inbox too: taking the consumer would wait for a hand-over that waits for its leases. */
  async backOff(ms: number): Promise<number> {
    const until = Date.now() + ms;
    const [settled] = await this.#post([{ kind: "backOff", until }], (verdict) => verdict.until ?? until);
    if (!settled!.ok) throw settled!.error;
    return settled!.value;
  }

  /** Stored, then each item answered with its holder's verdict (`value` of a done one). */
  async #post<T>(items: InboxPost[], value: (verdict: Verdict & { done: true }) => T): Promise<Settled<T>[]> {
    const verdicts = await this.inbox.post(this.queue, this.name, items);
    return verdicts.map((verdict) => (verdict.done ? { ok: true, value: value(verdict) } : { ok: false, error: verdictError(verdict)! }));
  }
}

const refOf = ({ part, offset, lease }: LeaseRef) => ({ part, offset, lease });
