import { defineCommand, runMain } from "citty";
import { consola } from "consola";
import { inspectQueue, listQueues } from "../src/inspect";
import fsDriver from "./drivers/fs";
import pkg from "../package.json" with { type: "json" };

const stat = defineCommand({
  meta: { name: "stat", description: "Show queues, their parts and consumers with their lag" },
  args: {
    dir: { type: "string", description: "Data directory", default: "./queues" },
    queue: { type: "positional", required: false, description: "One queue (default: all)" },
    json: { type: "boolean", description: "Print JSON" },
  },
  async run({ args }) {
    const driver = fsDriver({ dir: args.dir });
    const names = args.queue ? [args.queue] : await listQueues(driver);
    const stats = [];
    for (const name of names) {
      const queue = await inspectQueue(driver, name);
      if (!queue) throw new Error(`Queue "${name}" not found in ${args.dir}.`);
      stats.push(queue);
    }
    if (args.json) return console.log(JSON.stringify(stats, null, 2));
    if (stats.length === 0) return consola.info(`No queues in ${args.dir}.`);
    for (const q of stats) {
      consola.log(`${q.name}: ${q.messages} messages, ${q.bytes} bytes in ${q.parts.length} parts (current part ${q.currentPart})`);
      for (const c of q.consumers) consola.log(`  consumer ${c.name}: part ${c.part} position ${c.position}, lag ${c.lag}`);
    }
  },
});

export const main = defineCommand({
  meta: { name: "v-queue", version: pkg.version, description: "A durable file-based message queue, compatible with the v_queue crate" },
  subCommands: { stat },
});

runMain(main);
