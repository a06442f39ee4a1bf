import { defineCommand, runMain, type CommandDef } from "citty";
import { consola } from "consola";
import pkg from "../package.json" with { type: "json" };
import { consume, tail } from "./commands/consume";
import { push } from "./commands/push";
import { serve } from "./commands/serve";
import { stat } from "./commands/stat";
import { describeError } from "./commands/_errors";

const commands = { serve, push, consume, tail, stat } as Record<string, CommandDef>;

// An expected error (bad input, bad config, a file that is not there, a lock held...) is one
// clear message and exit code 1; only a real bug keeps its stack (citty prints it).
for (const command of Object.values(commands)) {
  const run = command.run!;
  command.run = async (context) => {
    try {
      return await run(context);
    } catch (error) {
      const message = describeError(error);
      if (message === undefined) throw error;
      consola.error(message);
      process.exit(1);
    }
  };
}

export const main = defineCommand({
  meta: { name: "v-queue", version: pkg.version, description: "A durable file-based message queue, compatible with the v_queue crate" },
  subCommands: commands,
});

runMain(main);
