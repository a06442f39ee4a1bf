/**
 * In-process wake-ups: a writer announces each batch, and consumers of the same queue on
 * the same storage in this process wake at once, without touching the storage.
 * Keyed by the driver's `storageKey` and the queue name.
 */
/** What the writer knows after a batch: readers of that part may read up to `edge` at once. */
export interface ChangeHint {
  part: number;
  edge: number;
  /** The bytes just written, `[start, edge)` of the part, when the writer kept them. */
  tail?: { start: number; data: Uint8Array };
}

type Listener = (hint?: ChangeHint) => void;

const listeners = new Map<string, Set<Listener>>();
const writers = new Map<string, number>();
/** The last batch each writer in this process announced: where its current part ends. */
const edges = new Map<string, { part: number; edge: number }>();

export const queueKey = (storageKey: string, queue: string): string => `${storageKey}\u0000${queue}`;

export function onQueueChange(key: string, listener: Listener): () => void {
  let set = listeners.get(key);
  if (!set) listeners.set(key, (set = new Set()));
  set.add(listener);
  return () => {
    set.delete(listener);
    if (set.size === 0 && listeners.get(key) === set) listeners.delete(key);
  };
}

export function emitQueueChange(key: string, hint?: ChangeHint): void {
  if (hint && writers.has(key)) edges.set(key, { part: hint.part, edge: hint.edge });
  else edges.delete(key);
  const set = listeners.get(key);
  if (!set) return;
  for (const listener of [...set]) listener(hint);
}

/** Whether anyone in this process waits on this queue (the writer then keeps its batch bytes for them). */
export function hasListeners(key: string): boolean {
  return listeners.has(key);
}

/** Whether a writer of this queue is open in this process (then waits need no polling). */
export function hasLocalWriter(key: string): boolean {
  return (writers.get(key) ?? 0) > 0;
}

/**
 * Where the writer of this queue in this process has written up to, as of its last batch:
 * readers of that part know its end without reading the info file. Undefined when there is
 * no writer here, or it has not written since it opened.
 */
export function localWriterEdge(key: string): { part: number; edge: number } | undefined {
  return edges.get(key);
}

export function registerLocalWriter(key: string): () => void {
  writers.set(key, (writers.get(key) ?? 0) + 1);
  return () => {
    const n = (writers.get(key) ?? 1) - 1;
    if (n > 0) writers.set(key, n);
    else writers.delete(key);
    // Waiters re-check: they must now poll for a writer elsewhere. (A change without a hint
    // also forgets the writer's edge.)
    emitQueueChange(key);
  };
}
