import type { QueueDriver } from "../core/driver";

/**
 * Watches for changes made by another process: the driver's watch on `dirs` where it has one,
 * and a poll every `intervalMs` in any case. `check` runs one at a time; a change seen while
 * it runs gets a check of its own after it (never dropped until the next poll). `onFound` is
 * called when a check finds something. Returns the function that stops it all.
 */
export function watchStorage(driver: QueueDriver, dirs: string[], intervalMs: number, check: () => Promise<boolean>, onFound: () => void): () => void {
  let busy = false;
  let again = false;
  let stopped = false;
  const run = async (): Promise<void> => {
    if (busy) return void (again = true);
    if (stopped) return;
    busy = true;
    again = false;
    let found = false;
    try {
      found = await check();
    } catch {
      // A failed check is retried on the next change or tick.
    } finally {
      busy = false;
    }
    if (found && !stopped) onFound();
    else if (again) return run();
  };
  const timer = setInterval(() => void run(), intervalMs);
  const unwatches = dirs.map((dir) => driver.watch?.(dir, () => void run()));
  // A change between the caller's own check and the watch being set up would go unseen until
  // the next poll: look once more now that the watch is on.
  void run();
  return () => {
    stopped = true;
    clearInterval(timer);
    for (const unwatch of unwatches) unwatch?.();
  };
}
