/**
 * Produces and consumes through the client (`v-queue/client`) against a running playground
 * app (`npm run playground:nitro` or `npm run playground:nuxt`, both on port 3000):
 *
 *   npm run playground:client
 *   VQ_URL=http://127.0.0.1:3000/_queue VQ_USER=admin VQ_PASSWORD=admin-secret npm run playground:client
 */
import { createClient } from "v-queue/client";

const baseURL = process.env.VQ_URL ?? "http://127.0.0.1:3000/_queue";
const client = createClient({
  baseURL,
  auth: { username: process.env.VQ_USER ?? "admin", password: process.env.VQ_PASSWORD ?? "admin-secret" },
});

console.log("health:", await client.health());

const landed = await client.produce("playground", ["hello from the client", { at: new Date().toISOString() }, new Uint8Array([0, 1, 2, 254, 255])]);
console.log(`produced ${landed.count} messages (part ${landed.first.part}, seq ${landed.first.seq}..${landed.last.seq})`);

const { messages, cursor } = await client.consume("playground", "script", { maxMessages: 100 });
for (const message of messages) {
  const shown = message.data instanceof Uint8Array ? `<${message.data.length} bytes: ${[...message.data].join(" ")}>` : String(message.data);
  console.log(`  #${message.seq} (${message.type}): ${shown}`);
}
if (cursor) await client.commit("playground", "script", cursor);

// A long poll: the consumer waits until a producer pushes, 300 ms later.
const start = performance.now();
const waiting = client.consume("playground", "script", { timeoutMs: 5000 });
setTimeout(() => void client.produce("playground", "pushed while a consumer waited"), 300);
const late = await waiting;
console.log(`long poll woke after ${Math.round(performance.now() - start)} ms with: ${String(late.messages[0]?.data)}`);
if (late.cursor) await client.commit("playground", "script", late.cursor);

const { consumers } = await client.consumers("playground");
console.log("consumers:", consumers.map((c) => `${c.name} lag ${c.lag}`).join(", "));
