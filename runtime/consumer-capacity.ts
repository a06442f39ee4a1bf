/**
 * How many consumers a server keeps open: `maxConsumers`, lowered for a while after the process
 * ran out of file descriptors (EMFILE), and how long an idle one stays open (shorter as the
 * cap fills). The registry (registry.ts) asks before opening one and when it sweeps idle ones.
 */

/** A slot handed out this recently is never closed to make room: its request is about to use it. */
export const HANDOUT_GRACE_MS = 1000;
/** How long the lower cap set by an EMFILE holds (renewed by each one). */
const PRESSURE_MS = 60_000;

/** What capacity needs to know of an open consumer. */
export interface IdleCandidate {
  readonly idle: boolean;
  readonly lastUsed: number;
}

export class ConsumerCapacity {
  readonly #maxConsumers: number;
  readonly #idleMs: number;
  /** After an EMFILE: fewer consumers open than `maxConsumers`, until `#pressureUntil`. */
  #pressureCap = Infinity;
  #pressureUntil = 0;

  constructor(maxConsumers: number, idleMs: number) {
    this.#maxConsumers = maxConsumers;
    this.#idleMs = idleMs;
  }

  /** The most consumers open at once: `maxConsumers`, or less for a while after an EMFILE. */
  cap(): number {
    return Date.now() < this.#pressureUntil ? Math.min(this.#pressureCap, this.#maxConsumers) : this.#maxConsumers;
  }

  /** `consumerIdleMs` with `open` consumers open, shorter the fuller the cap is past half: at the cap, a second. */
  idleLimit(open: number): number {
    const fill = open / this.cap();
    return fill <= 0.5 ? this.#idleMs : Math.min(this.#idleMs, Math.max(HANDOUT_GRACE_MS, Math.round(this.#idleMs * 2 * (1 - fill))));
  }

  /** Out of descriptors with `open` consumers open: the cap drops below them for a while. Says whether this starts a pressure period (warn once). */
  pressure(open: number): { cap: number; started: boolean } {
    const now = Date.now();
    this.#pressureCap = Math.max(1, Math.min(this.cap(), Math.floor((open * 3) / 4)));
    const started = now >= this.#pressureUntil;
    this.#pressureUntil = now + PRESSURE_MS;
    return { cap: this.#pressureCap, started };
  }
}

/** Up to `count` of `entries` that may be closed to make room: idle, not handed out just now, least recently used first. */
export function leastUsedIdle<K, S extends IdleCandidate>(entries: Iterable<[K, { slot?: S }]>, count: number): [K, { slot?: S }][] {
  if (count <= 0) return [];
  const now = Date.now();
  const idle = [...entries].filter(([, e]) => e.slot?.idle && now - e.slot.lastUsed >= HANDOUT_GRACE_MS);
  idle.sort(([, a], [, b]) => a.slot!.lastUsed - b.slot!.lastUsed);
  return idle.slice(0, count);
}
