import type { Cluster, Redis } from "ioredis";
import { VQueueError, ioError } from "../../../src/core/errors";
import { DRIVER_NAME } from "./redis-keys";
import { SCRIPTS, type ScriptName } from "./redis-scripts";

export type RedisClient = Redis | Cluster;

export interface WaitReplicas {
  /** Replicas that must have each write before it is acknowledged (Redis `WAIT`). */
  replicas: number;
  /** How long to wait for them. @default 1000 */
  timeoutMs?: number;
}

/** A script call as ioredis's `defineCommand` adds it: keys first, then arguments. */
type ScriptCall = (...args: (string | number | Buffer)[]) => Promise<unknown>;
interface Scripted {
  [name: string]: unknown;
  pipeline(): { [name: string]: unknown; exec(): Promise<[Error | null, unknown][] | null> };
}

/**
 * The driver's calls to Redis: the scripts (defined once per client with `defineCommand`, so
 * ioredis loads them and sends EVALSHA), a `WAIT` after each write when asked, and every
 * failure as `E_IO` with Redis's error as `cause`.
 */
export class RedisCalls {
  readonly client: RedisClient;
  readonly #wait: { replicas: number; timeoutMs: number } | undefined;

  constructor(client: RedisClient, wait: WaitReplicas | undefined) {
    this.client = client;
    this.#wait = wait && wait.replicas > 0 ? { replicas: wait.replicas, timeoutMs: wait.timeoutMs ?? 1000 } : undefined;
    const scripted = client as unknown as Scripted;
    for (const [name, script] of Object.entries(SCRIPTS)) {
      if (typeof scripted[name] !== "function") client.defineCommand(name, { numberOfKeys: script.keys, lua: script.lua });
    }
  }

  /** Runs a script that reads or changes no replicated state worth waiting for. */
  async run(name: ScriptName, ...args: (string | number | Buffer)[]): Promise<unknown> {
    try {
      return await ((this.client as unknown as Scripted)[name] as ScriptCall).apply(this.client, args);
    } catch (error) {
      throw ioError(DRIVER_NAME, error);
    }
  }

  /**
   * Runs a write script, then (with `waitReplicas`) `WAIT` in the same pipeline, so that it
   * goes to the node that took the write: fewer replicas than asked is `E_IO`, the write not
   * acknowledged (it may be there all the same, on the master only).
   */
  async write(name: ScriptName, ...args: (string | number | Buffer)[]): Promise<unknown> {
    const wait = this.#wait;
    if (!wait) return this.run(name, ...args);
    let results: [Error | null, unknown][] | null;
    try {
      const pipeline = (this.client as unknown as Scripted).pipeline();
      (pipeline[name] as (...a: unknown[]) => unknown)(...args);
      (pipeline.call as (...a: unknown[]) => unknown)("WAIT", wait.replicas, wait.timeoutMs);
      results = await pipeline.exec();
    } catch (error) {
      throw ioError(DRIVER_NAME, error);
    }
    const [[writeError, reply], [waitError, acked]] = results as [[Error | null, unknown], [Error | null, unknown]];
    if (writeError) throw ioError(DRIVER_NAME, writeError);
    if (waitError) throw ioError(DRIVER_NAME, waitError);
    if (Number(acked) < wait.replicas) {
      throw new VQueueError(
        "E_IO",
        `The ${DRIVER_NAME} driver's write reached ${Number(acked)} of the ${wait.replicas} replica(s) asked for (option waitReplicas) within ${wait.timeoutMs} ms: not acknowledged (it may be on the master only, and lost if the master fails).`,
      );
    }
    return reply;
  }

  /** Any other command, its failure as `E_IO`. */
  async call<T>(run: (client: RedisClient) => Promise<T>): Promise<T> {
    try {
      return await run(this.client);
    } catch (error) {
      throw ioError(DRIVER_NAME, error);
    }
  }
}
