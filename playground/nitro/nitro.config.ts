import { defineNitroConfig } from "nitro/config";
import vQueue from "v-queue/nitro";

export default defineNitroConfig({
  compatibilityDate: "2025-10-01",
  modules: [
    vQueue({
      prefix: "/_queue",
      // Demo users. In a real app set them at run time instead:
      // NITRO_V_QUEUE_DEFAULT_AUTH_USERS='[{"username":"admin","password":"..."}]'
      auth: {
        users: [
          { username: "admin", password: "admin-secret" },
          { username: "reader", password: "reader-secret", write: false },
        ],
      },
    }),
  ],
});
