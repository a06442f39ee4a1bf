import { defineCommand } from "citty";
import { consola } from "consola";
import { inspectQueue, listQueues, type QueueStats } from "../../src/inspect";
import { CliError, explain, httpClient, openStorage, storageLabel, targetArgs } from "./_shared";

export const stat = defineCommand({
  meta: { name: "stat", description: "Show queues, their parts and consumers with their lag" },
  args: {
    queue: { type: "positional", required: false, description: "One queue (default: all)" },
    json: { type: "boolean", description: "Print JSON" },
    ...targetArgs,
  },
  async run({ args }) {
    if (args.url) return statOverHttp(args.url, args.user, args.queue, args.json);
    const driver = await openStorage(args);
    try {
      const names = args.queue ? [args.queue] : await listQueues(driver);
      const stats: QueueStats[] = [];
      for (const name of names) {
        const queue = await inspectQueue(driver, name).catch((error: unknown) => explain(error, "stat"));
        if (!queue) throw new CliError(`Queue "${name}" not found in ${storageLabel(args)}.`);
        stats.push(queue);
      }
      if (args.json) return console.log(JSON.stringify(stats, null, 2));
      if (stats.length === 0) return consola.info(`No queues in ${storageLabel(args)}.`);
      for (const q of stats) {
        console.log(`${q.name}: ${q.messages} messages, ${q.bytes} bytes in ${q.parts.length} part${q.parts.length === 1 ? "" : "s"} (current part ${q.currentPart}, ${q.currentCount} messages)`);
        for (const c of q.consumers) console.log(`  consumer ${c.name}: part ${c.part}, position ${c.position}, read ${c.count} in part, lag ${c.lag}`);
      }
    } finally {
      await driver.dispose?.();
    }
  },
});

async function statOverHttp(url: string, user: string | undefined, queue: string | undefined, json: boolean | undefined): Promise<void> {
  const call = httpClient(url, user);
  const names = queue ? [queue] : ((await (await call("/api/v1/queues")).json()) as { queues: string[] }).queues;
  const out: HttpQueueStat[] = [];
  for (const name of names) {
    const q = encodeURIComponent(name);
    const info = (await (await call(`/api/v1/queues/${q}`)).json()) as Omit<HttpQueueStat, "consumers">;
    const { consumers } = (await (await call(`/api/v1/queues/${q}/consumers`)).json()) as Pick<HttpQueueStat, "consumers">;
    out.push({ ...info, consumers });
  }
  if (json) return console.log(JSON.stringify(out, null, 2));
  if (out.length === 0) return consola.info(`No queues on ${url}.`);
  for (const q of out) {
    console.log(`${q.name}: ${q.messages} messages, ${q.bytes} bytes in ${q.parts} parts (current part ${q.id}, ${q.count_pushed} messages)`);
    for (const c of q.consumers) console.log(`  consumer ${c.name}: part ${c.part}, position ${c.position}, read ${c.count_popped} in part, lag ${c.lag}`);
  }
}

interface HttpQueueStat {
  name: string;
  id: number;
  count_pushed: number;
  parts: number;
  messages: number;
  bytes: number;
  consumers: { name: string; part: number; position: number; count_popped: number; lag: number }[];
}
