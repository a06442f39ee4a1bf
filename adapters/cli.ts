import { defineCommand, renderUsage, runMain, type ArgsDef } from "citty";
import { consola } from "consola";
import pkg from "../package.json" with { type: "json" };
import { commands } from "./commands/_all";
import { VQueueError } from "../src/core/errors";
import { describeError, lockedHint } from "./commands/_errors";
import { checkFlags } from "./commands/_flags";

// An expected error (bad input, bad config, a file that is not there, a lock held...) is one
// clear message and exit code 1; only a real bug keeps its stack (citty prints it).
// A flag a command does not take is refused (with the nearest it does), never read as a switch.
for (const [name, command] of Object.entries(commands)) {
  const run = command.run!;
  command.run = async (context) => {
    try {
      checkFlags(context.rawArgs, (command.args ?? {}) as ArgsDef, name);
      return await run(context);
    } catch (error) {
      const message = describeError(error);
      if (message === undefined) throw error;
      const hint =
        VQueueError.isError(error) && error.code === "E_LOCKED" ? await lockedHint(context.args as { dir?: string; storage?: string; url?: string }) : "";
      consola.error(hint ? `${message}\n${hint}` : message);
      process.exit(1);
    }
  };
}

export const main = defineCommand({
  meta: { name: "v-queue", version: pkg.version, description: "A durable file-based message queue, compatible with the v_queue crate" },
  subCommands: commands,
});

/** Colour only on a terminal, and never with NO_COLOR set (https://no-color.org) or TERM=dumb. */
function useColor(stream: { isTTY?: boolean } = process.stdout, env: Record<string, string | undefined> = process.env): boolean {
  if (env.NO_COLOR || env.TERM === "dumb") return false;
  return stream.isTTY === true || (env.FORCE_COLOR !== undefined && env.FORCE_COLOR !== "0");
}

// citty colours its help whenever NO_COLOR is not exactly "1", even into a pipe or a file.
// eslint-disable-next-line no-control-regex
const ANSI = /\u001b\[[0-9;]*m/g;

runMain(main, {
  showUsage: async (cmd, parent) => {
    const text = await renderUsage(cmd, parent);
    console.log(`${useColor() ? text : text.replace(ANSI, "")}\n`);
  },
});
