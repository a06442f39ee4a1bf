import type { RedisClient } from "./redis-client";

export interface Watcher {
  /** Calls `onChange` on each message of `channel`; returns the function that stops it. */
  watch(channel: string, onChange: () => void): () => void;
  close(): Promise<void>;
}

/**
 * Wake-ups over pub/sub: every write script PUBLISHes on its queue's channel, and one
 * subscriber connection (a duplicate of the client, made at the first watch) listens for the
 * channels watched here. Plain PUBLISH reaches a subscriber on any node of a cluster. A lost
 * message costs only latency: consumers poll as well (src/storage/watch.ts).
 */
export function createWatcher(client: RedisClient): Watcher {
  let subscriber: RedisClient | undefined;
  const listeners = new Map<string, Set<() => void>>();
  const connect = (): RedisClient => {
    if (subscriber) return subscriber;
    const sub = (subscriber = client.duplicate() as RedisClient);
    sub.on("message", (channel: string) => {
      for (const listener of listeners.get(channel) ?? []) listener();
    });
    sub.on("error", () => {}); // it reconnects by itself; consumers poll meanwhile
    return sub;
  };
  return {
    watch(channel, onChange) {
      let set = listeners.get(channel);
      if (!set) {
        listeners.set(channel, (set = new Set()));
        void connect()
          .subscribe(channel)
          .catch(() => {});
      }
      set.add(onChange);
      return () => {
        set.delete(onChange);
        if (set.size > 0 || listeners.get(channel) !== set) return;
        listeners.delete(channel);
        void subscriber?.unsubscribe(channel).catch(() => {});
      };
    },
    async close() {
      listeners.clear();
      const sub = subscriber;
      subscriber = undefined;
      sub?.disconnect();
    },
  };
}
