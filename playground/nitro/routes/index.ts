import { defineHandler } from "nitro/h3";

export default defineHandler(() => ({
  app: "v-queue playground (Nitro v3)",
  api: "/_queue/api/v1/queues (Basic auth: admin/admin-secret, reader/reader-secret)",
  push: "POST /api/orders with a JSON body pushes to the queue orders from server code",
}));
