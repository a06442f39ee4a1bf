/**
 * Wake-ups between an outcome log's writer and its readers in one process (keyed by storage and
 * path): a reader polls its file, and is woken at once when this process wrote to it. Readers of
 * a log written by another process poll at the driver's pace.
 */
const listeners = new Map<string, Set<() => void>>();

/** The key of the log at `path` on the storage `storageKey` names: the writer's and its readers' alike. */
export const outcomeWakeKey = (storageKey: string, path: string): string => `${storageKey}\u0000${path}`;

/** Calls `listener` after each write to the log `key` names, until the returned function is called. */
export function onOutcomes(key: string, listener: () => void): () => void {
  let set = listeners.get(key);
  if (!set) listeners.set(key, (set = new Set()));
  set.add(listener);
  return () => {
    set.delete(listener);
    if (set.size === 0 && listeners.get(key) === set) listeners.delete(key);
  };
}

export function notifyOutcomes(key: string): void {
  const set = listeners.get(key);
  if (set) for (const listener of [...set]) listener();
}
