import type { DriverLock, QueueDriver } from "../core/driver";
import type { QueueProblem } from "../core/errors";
import { pruneQueue } from "./prune";
import { RETENTION_DEFAULTS, retains, type RetentionOptions } from "../options/retention";

export interface RetentionRunner {
  /** Runs a round soon (after a new part); a round in progress is followed by one more. */
  kick(): void;
  /** No more rounds; waits for the one in progress. */
  stop(): Promise<void>;
}

/**
 * The writer's background retention: a round every `intervalMs`, and one after each new part,
 * each deleting at most `maxPartsPerRound` parts, one round at a time. Never in a push's way:
 * rounds run beside the batches (their I/O shares the storage, nothing waits for them), and
 * a failed round is reported (`PRUNE_FAILED`) and tried again at the next.
 */
export function startRetention(
  driver: QueueDriver,
  queue: string,
  retention: RetentionOptions | undefined,
  onProblem: (problem: QueueProblem) => void,
  fence?: DriverLock,
): RetentionRunner | undefined {
  if (!retains(retention)) return undefined;
  const { intervalMs, maxPartsPerRound } = { ...RETENTION_DEFAULTS, ...retention };
  let running: Promise<void> | undefined;
  let again = false;
  let stopped = false;
  const round = (): void => {
    if (stopped) return;
    if (running) return void (again = true);
    running = (async () => {
      try {
        await pruneQueue(driver, queue, retention, { limit: maxPartsPerRound, fence });
      } catch (error) {
        onProblem({
          code: "PRUNE_FAILED",
          queue,
          message: `Retention of queue "${queue}" failed (${(error as Error)?.message ?? error}); trying again in ${intervalMs} ms.`,
        });
      } finally {
        running = undefined;
        if (again && !stopped) {
          again = false;
          setTimeout(round, 0);
        }
      }
    })();
  };
  const timer = setInterval(round, intervalMs);
  (timer as { unref?: () => void }).unref?.();
  const soon = () => {
    const t = setTimeout(round, 0);
    (t as { unref?: () => void }).unref?.();
  };
  soon();
  return {
    kick: soon,
    async stop() {
      stopped = true;
      clearInterval(timer);
      await running;
    },
  };
}
