import { defineCommand } from "citty";
import { purgeQueue } from "../../src/admin/purge";
import { apiClient, log, plural, requireYes, targetArgs, withStorage, yesArg } from "./_shared";

export const purge = defineCommand({
  meta: { name: "purge", description: "Remove every message of a queue; the queue and its consumers stay, at the new start (needs --yes)" },
  args: {
    queue: { type: "positional", required: true, description: "The queue" },
    ...yesArg,
    ...targetArgs,
  },
  async run({ args }) {
    const { queue } = args;
    requireYes(args.yes, `purge queue "${queue}" (every message goes)`);
    const result = args.url
      ? await apiClient(args.url, args.user).purge(queue)
      : await withStorage(args, `Cannot purge "${queue}"`, (driver) => purgeQueue(driver, queue));
    log.success(
      `Purged "${queue}": ${plural(result.messages, "message")}, ${plural(result.bytes, "byte")} in ${plural(result.parts, "part")} removed; it goes on in part ${result.part}.`,
    );
  },
});
