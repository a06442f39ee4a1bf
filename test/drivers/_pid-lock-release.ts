/**
 * `node --import jiti/register _pid-lock-release.ts <lockPath>` (under a low `ulimit -n`):
 * takes the lock, uses up every file descriptor, releases, and prints
 * `{"exhausted": "EMFILE", "released": <lock file gone>, "error": <release error code>}`.
 */
import { existsSync, openSync } from "node:fs";
import { acquirePidLock } from "../../adapters/drivers/utils/pid-lock";

const path = process.argv[2]!;
const lock = await acquirePidLock(path);
const fds: number[] = [];
let exhausted: string | undefined;
try {
  for (;;) fds.push(openSync("/dev/null", "r"));
} catch (error) {
  exhausted = (error as NodeJS.ErrnoException).code;
}
let failure: string | undefined;
await lock!.release().catch((error: NodeJS.ErrnoException) => (failure = error.code ?? error.message));
process.stdout.write(`${JSON.stringify({ exhausted, released: !existsSync(path), error: failure })}\n`);
