// Server code of the app pushing to a queue without HTTP: the same open writer as the API.
// `useVQueue` is auto-imported by the module (or: import { useVQueue } from "v-queue/nitro").
export default defineEventHandler(async (event) => {
  const order = await readBody<Record<string, unknown>>(event);
  const landed = await useVQueue().push("orders", { ...order, receivedAt: new Date().toISOString() });
  return { queued: true, position: landed.last };
});
