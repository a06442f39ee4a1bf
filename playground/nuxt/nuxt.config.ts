// Nuxt 4.3.x: the last Nuxt 4 that runs on Node 20 (4.4+ needs Node 22).
export default defineNuxtConfig({
  compatibilityDate: "2025-10-01",
  modules: ["v-queue/nuxt"],
  vQueue: {
    prefix: "/_queue",
    // Demo users. In a real app set them at run time instead:
    // NUXT_V_QUEUE_DEFAULT_AUTH_USERS='[{"username":"admin","password":"..."}]'
    auth: {
      users: [
        { username: "admin", password: "admin-secret" },
        { username: "reader", password: "reader-secret", write: false },
      ],
    },
  },
  devtools: { enabled: false },
  telemetry: false,
});
