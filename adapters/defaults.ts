/**
 * Where queues live when nobody says: the one place for the default data directories of every
 * adapter. `resolveDriver` (adapters/storage.ts) applies them; the engine and the HTTP runtime
 * have no default storage, they take a driver.
 */

/** The CLI, the standalone server, the `v-queue` entry on Node and the fs driver. */
export const DEFAULT_DIR = "./queues";

/** Nitro and Nuxt: under the app's `.data`, next to Nitro's own storage, relative to the server's working directory. */
export const NITRO_DEFAULT_DIR = ".data/v-queue";
