/** Reads a consumer's outcome events (`GET .../events`) as raw server-sent events: the frames as the server wrote them. */
import type { OutcomeEventJSON } from "../../protocol/api";

export interface SseFrame {
  id?: string;
  event?: string;
  data?: string;
  /** Comment lines (": ..."), without the colon. */
  comments: string[];
}

export interface EventReader {
  response: Response;
  /** The next frame carrying an event (comments skipped), or fails after `ms`. */
  next(ms?: number): Promise<{ frame: SseFrame; outcome: OutcomeEventJSON }>;
  /** Events until none comes for `quietMs`. */
  drain(quietMs: number): Promise<OutcomeEventJSON[]>;
  /** Every frame read so far, comments included. */
  frames: SseFrame[];
  close(): void;
}

/** Opens `url` (an events route) and reads its frames as they come. */
export async function openEvents(url: string, headers: Record<string, string> = {}): Promise<EventReader> {
  const abort = new AbortController();
  const response = await fetch(url, { headers: { accept: "text/event-stream", ...headers }, signal: abort.signal });
  const frames: SseFrame[] = [];
  const queue: { frame: SseFrame; outcome: OutcomeEventJSON }[] = [];
  let wake: (() => void) | undefined;
  let ended: unknown;
  void (async () => {
    const reader = response.body!.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let end: number;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const frame: SseFrame = { comments: [] };
          for (const line of buffer.slice(0, end).split("\n")) {
            if (line.startsWith(":")) frame.comments.push(line.slice(1).trim());
            else {
              const colon = line.indexOf(":");
              const field = line.slice(0, colon) as "id" | "event" | "data";
              frame[field] = line.slice(colon + 1).replace(/^ /, "");
            }
          }
          buffer = buffer.slice(end + 2);
          frames.push(frame);
          if (frame.data !== undefined) queue.push({ frame, outcome: JSON.parse(frame.data) as OutcomeEventJSON });
          wake?.();
        }
      }
      ended = new Error("the stream ended");
    } catch (error) {
      ended = error;
    }
    wake?.();
  })();
  const next = async (ms = 10_000) => {
    const deadline = Date.now() + ms;
    while (queue.length === 0) {
      if (ended !== undefined) throw ended;
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no event within ${ms} ms`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
    return queue.shift()!;
  };
  return {
    response,
    frames,
    next,
    async drain(quietMs) {
      const out: OutcomeEventJSON[] = [];
      for (;;) {
        try {
          out.push((await next(quietMs)).outcome);
        } catch {
          return out;
        }
      }
    },
    close: () => abort.abort(),
  };
}
