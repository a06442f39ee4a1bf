import { defineCommand, runMain, type CommandDef } from "citty";
import { consola } from "consola";
import pkg from "../package.json" with { type: "json" };
import { consume, tail } from "./commands/consume";
import { push } from "./commands/push";
import { serve } from "./commands/serve";
import { stat } from "./commands/stat";
import { CliError } from "./commands/_shared";

const commands = { serve, push, consume, tail, stat } as Record<string, CommandDef>;

// A user error is one clear line and exit code 1; anything else keeps its stack (citty prints it).
for (const command of Object.values(commands)) {
  const run = command.run!;
  command.run = async (context) => {
    try {
      return await run(context);
    } catch (error) {
      if (!(error instanceof CliError)) throw error;
      consola.error(error.message);
      process.exit(1);
    }
  };
}

export const main = defineCommand({
  meta: { name: "v-queue", version: pkg.version, description: "A durable file-based message queue, compatible with the v_queue crate" },
  subCommands: commands,
});

runMain(main);
