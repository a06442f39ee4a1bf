import { defineCommand } from "citty";
import { consola } from "consola";
import { resolve } from "pathe";
import { envConfig, loadServeConfig, parseBind, readCompressionDictionary, type LogLevel, type VQueueConfig } from "../config";
import { serveQueues } from "../server";
import { CONSOLA_LEVELS, CliError } from "./_shared";

export const serve = defineCommand({
  meta: { name: "serve", description: "Serve the queues of a directory over HTTP (the v-queue-server API)" },
  args: {
    dir: { type: "string", description: "Data directory [default: ./queues]", valueHint: "path" },
    "data-dir": { type: "string", description: "Same as --dir (the Rust server's name)", valueHint: "path" },
    storage: {
      type: "string",
      description:
        "Other storage instead of --dir: memory:, redis://host:port/db, redis+vq://host:port/db, redis+vq+sentinel://s1:26379,s2:26379/0?name=mymaster, unstorage-fs:<dir>",
      valueHint: "spec",
    },
    port: { type: "string", description: "Port [default: 9093]", valueHint: "port" },
    host: { type: "string", description: "Interface [default: 127.0.0.1; 0.0.0.0 for all]", valueHint: "host" },
    bind: { type: "string", description: "host:port (the Rust server's option)", valueHint: "host:port" },
    auth: { type: "boolean", description: "Basic auth with the configured users (--no-auth turns it off)" },
    config: { type: "string", description: "Config file [default: vqueue.config.* or .vqueuerc in the current directory]", valueHint: "file" },
    "log-level": {
      type: "string",
      description: "error, warn (refused logins), info (+ each produce, commit, rewind, delete), debug (+ every request) or trace [default: info]",
      valueHint: "level",
    },
    durability: { type: "string", description: "fsync, interval or none [default: fsync]", valueHint: "mode" },
    compression: {
      type: "string",
      description: "none or zstd: zstd writes new parts compressed (v3; crate 0.2.x readers cannot read them) [default: none]",
      valueHint: "codec",
    },
    "compression-dictionary": {
      type: "string",
      description: "A zstd dictionary file (e.g. from zstd --train) for every compressed part [default: each part builds its own]",
      valueHint: "file",
    },
    zstd: {
      type: "string",
      description: "The zstd library: native (zstd-napi), wasm (zstd-codec) or auto (native when zstd-napi is installed and loads, else wasm) [default: auto]",
      valueHint: "lib",
    },
  },
  async run({ args }) {
    const overrides: VQueueConfig = {};
    if (args.bind) Object.assign(overrides, parseBind(args.bind));
    if (args.host) overrides.host = args.host;
    if (args.port !== undefined) {
      if (!/^\d{1,5}$/.test(args.port)) throw new CliError(`Invalid --port ${JSON.stringify(args.port)}.`);
      overrides.port = Number(args.port);
    }
    if (args.dir ?? args["data-dir"]) overrides.dir = args.dir ?? args["data-dir"];
    if (args.storage) overrides.storage = args.storage;
    if (args.durability) overrides.durability = args.durability as VQueueConfig["durability"];
    if (args.compression) overrides.compression = args.compression as VQueueConfig["compression"];
    if (args["compression-dictionary"]) overrides.compressionDictionary = args["compression-dictionary"];
    if (args.zstd) overrides.zstd = args.zstd as VQueueConfig["zstd"];
    if (args["log-level"]) overrides.logLevel = args["log-level"] as LogLevel;
    if (args.auth === false) overrides.auth = false;
    let config;
    let compressionDictionary: Uint8Array | undefined;
    try {
      config = await loadServeConfig({ configFile: args.config, overrides });
      // Read at start: a missing file stops the server here, not at the first compressed part.
      if (config.compressionDictionary) compressionDictionary = await readCompressionDictionary(config.compressionDictionary);
    } catch (error) {
      throw new CliError((error as Error).message);
    }
    consola.level = CONSOLA_LEVELS[config.logLevel];
    if (args.auth === true && !config.auth) throw new CliError("--auth needs users: give them in the config file (auth.users) or VQUEUE_USERS=name:password.");
    const authOn = config.auth !== false && (config.auth.users?.length ?? 0) > 0 && config.auth.enabled !== false;
    const loopback = ["127.0.0.1", "localhost", "::1"].includes(config.host);
    // Open to others only when said so: no users is the default, not a choice.
    const noAuthSaid = args.auth === false || envConfig(process.env).auth === false;
    if (!authOn && !loopback && !noAuthSaid) {
      throw new CliError(
        `Refusing to serve on ${config.host} without auth: anyone who can reach it could read, change and delete queues. Give users (auth.users in the config file, or VQUEUE_USERS=name:password), or say --no-auth (VQUEUE_NO_AUTH=1) to serve it open.`,
      );
    }
    const server = await serveQueues({ ...config, compressionDictionary, handleSignals: true, logRequests: true }).catch((error: NodeJS.ErrnoException) => {
      if (error.code === "EADDRINUSE" || /available port/.test(error.message))
        throw new CliError(`Port ${config.port} on ${config.host} is taken: pick another with --port.`);
      throw error;
    });
    if (config.configFile) consola.info(`Config: ${config.configFile}`);
    consola.success(
      `v-queue serving ${config.storage ?? resolve(config.dir)} on ${server.url} (durability ${config.durability}, auth ${authOn ? "on" : "off"})`,
    );
    if (config.dashboard !== false) consola.info(`Dashboard: ${server.url.replace(/\/?$/, "/")}`);
    if (!authOn && !loopback) consola.warn(`Auth is off and ${config.host} is not loopback: anyone who can reach it can read and write.`);
  },
});
