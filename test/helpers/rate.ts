/** Hand-out times of leased messages, and how many of them fall in one window: for rate-limit tests. */

/** When the server handed `message` out (ms, its clock): its lease's end less the lease time it was given. */
export const handedOutAt = (message: { leaseUntil: number }, leaseMs: number): number => message.leaseUntil - leaseMs;

/** The most of `times` (ms) in any window `[t, t + durationMs)`: what a sliding-window limit bounds. */
export function mostInAnyWindow(times: readonly number[], durationMs: number): number {
  const sorted = [...times].sort((a, b) => a - b);
  let most = 0;
  for (let i = 0, j = 0; i < sorted.length; i++) {
    while (sorted[j]! < sorted[i]! - durationMs + 1) j++;
    most = Math.max(most, i - j + 1);
  }
  return most;
}
