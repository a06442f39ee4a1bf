import { defineCommand } from "citty";
import { checkPartitionCount, declarePartitions, readPartitions } from "../../src/partitions/declaration";
import { apiClient, CliError, log, targetArgs, withStorage } from "./_shared";

export const create = defineCommand({
  meta: { name: "create", description: "Declare a partitioned queue (docs/partitioned.md): --partitions P, never changed afterwards" },
  args: {
    queue: { type: "positional", required: true, description: "The queue" },
    partitions: { type: "string", required: true, description: "How many partitions (1 to 1024)", valueHint: "P" },
    ...targetArgs,
  },
  async run({ args }) {
    const { queue } = args;
    const partitions = partitionsArg(args.partitions);
    const created = args.url
      ? (await apiClient(args.url, args.user).declare(queue, { partitions })).created
      : await withStorage(args, `Cannot declare "${queue}"`, async (driver) => {
          if ((await readPartitions(driver, queue)) === partitions) return false;
          await declarePartitions(driver, queue, partitions);
          return true;
        });
    log.success(created ? `Declared "${queue}" with ${partitions} partitions.` : `"${queue}" is already declared with ${partitions} partitions.`);
  },
});

/** `--partitions` as a whole number from 1 to 1024. */
function partitionsArg(value: unknown): number {
  const count = typeof value === "string" && /^\d{1,5}$/.test(value) ? Number(value) : NaN;
  try {
    checkPartitionCount(Number.isNaN(count) ? value : count, "--partitions");
  } catch (error) {
    throw new CliError((error as Error).message);
  }
  return count;
}
