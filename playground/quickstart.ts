/**
 * Writes a few messages to the queue "orders" in ./.data, then reads them back with the
 * consumer "billing", which remembers where it stopped: run it twice and it only shows
 * the new messages.
 */
import { inspectQueue, openConsumer, openQueue } from "../adapters/node";
import fsDriver from "../adapters/drivers/fs";

const dir = "./.data";

const queue = await openQueue("orders", { dir });
const landed = await queue.pushBatch(["plain text", { id: Date.now(), item: "book", qty: 1 }, new TextEncoder().encode("raw bytes")]);
console.log(`pushed ${landed.length} messages into part ${landed[0]!.part}`);

const billing = await openConsumer("orders", "billing", { dir });
for (const message of await billing.read({ max: 100 })) {
  const shown = typeof message.data === "string" ? message.data : `<${message.size} bytes>`;
  console.log(`part ${message.part} #${message.seq} (${message.type}): ${shown}`);
}
await billing.commit();

const stats = await inspectQueue(fsDriver({ dir }), "orders");
console.log(`queue "orders": ${stats?.messages} messages in ${stats?.parts.length} parts; billing lag ${stats?.consumers[0]?.lag}`);

await billing.close();
await queue.close();
