/**
 * The server in its own process, for a run under a low fd limit:
 * `bash -c 'ulimit -n 256; exec node --import jiti/register _fd-server-process.ts <dir> <port> [optionsJSON]'`.
 * Prints `listening`, then each warning and error on stderr; SIGTERM closes it gracefully.
 */
import { serveQueues } from "../../adapters/server";

const [dir, port, options = "{}"] = process.argv.slice(2);
const log =
  (level: string) =>
  (...args: unknown[]) =>
    process.stderr.write(`${level} ${args.map((a) => (a instanceof Error ? (a.stack ?? a.message) : String(a))).join(" ")}\n`);
await serveQueues({
  dir,
  port: Number(port),
  durability: "none",
  syncCommits: false,
  handleSignals: true,
  ...(JSON.parse(options) as object),
  logger: { error: log("error"), warn: log("warn") },
});
process.stdout.write("listening\n");
