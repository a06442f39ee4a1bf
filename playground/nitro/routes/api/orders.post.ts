// Server code of the app pushing to a queue without HTTP: the same open writer as the API.
import { defineHandler } from "nitro/h3";
import { useVQueue } from "v-queue/nitro";

export default defineHandler(async (event) => {
  const order = (await event.req.json()) as Record<string, unknown>;
  const landed = await useVQueue().push("orders", { ...order, receivedAt: new Date().toISOString() });
  return { queued: true, position: landed.last };
});
