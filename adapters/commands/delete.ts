import { defineCommand } from "citty";
import { deleteConsumer, deleteQueue } from "../../src/admin/delete";
import { apiClient, log, plural, requireYes, targetArgs, withStorage, yesArg } from "./_shared";

export const del = defineCommand({
  meta: { name: "delete", description: "Delete a queue (its messages, consumers and files), or one consumer of it (needs --yes)" },
  args: {
    queue: { type: "positional", required: true, description: "The queue" },
    consumer: { type: "positional", required: false, description: "Only this consumer (its saved position)" },
    ...yesArg,
    ...targetArgs,
  },
  async run({ args }) {
    const { queue, consumer } = args;
    requireYes(args.yes, consumer ? `delete consumer "${consumer}" of "${queue}"` : `delete queue "${queue}" (its messages, consumers and files)`);
    if (consumer) {
      if (args.url) await apiClient(args.url, args.user).deleteConsumer(queue, consumer);
      else await withStorage(args, `Cannot delete consumer "${consumer}" of "${queue}"`, (driver) => deleteConsumer(driver, queue, consumer));
      return log.success(`Deleted consumer "${consumer}" of "${queue}".`);
    }
    const result = args.url
      ? await apiClient(args.url, args.user).deleteQueue(queue)
      : await withStorage(args, `Cannot delete "${queue}"`, (driver) => deleteQueue(driver, queue));
    log.success(`Deleted "${queue}": ${plural(result.parts, "part")} and ${plural(result.consumers.length, "consumer")}.`);
  },
});
