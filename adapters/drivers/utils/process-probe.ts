import { readFileSync } from "node:fs";

/**
 * Whether a process on this host still runs, for every lock that names its owner's pid. Signal 0
 * alone is not enough: it reaches a zombie (killed, not reaped yet by a parent that does not wait,
 * as a container's PID 1 may never), which holds nothing. Where `/proc` tells (Linux), a process
 * in state `Z` or `X` is dead; elsewhere (macOS) signal 0 is all there is.
 *
 * Throws what signal 0 threw when this runtime may not probe processes (Deno without
 * `--allow-run`): the caller says what to do about it.
 */
export function isProcessAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (error) {
    const { code } = error as NodeJS.ErrnoException;
    if (code === "ESRCH") return false;
    // EPERM: alive, another user's.
    if (code !== "EPERM") throw error;
  }
  const state = procStat(pid)?.[0];
  return state !== "Z" && state !== "X";
}

/** The process start time in clock ticks since boot (Linux /proc), to tell reused pids apart. */
export function processStart(pid: number): string | undefined {
  return procStat(pid)?.[19];
}

/** The fields of `/proc/<pid>/stat` after the command name (which may hold spaces and parentheses); undefined without /proc. */
function procStat(pid: number): string[] | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  } catch {
    return undefined;
  }
}
