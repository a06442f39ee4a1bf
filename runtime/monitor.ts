// DEV STUB (metrics branch only): the lead's Monitor interface, to be replaced by main's at merge.
export interface ConsumerSample {
  name: string;
  kind: "ordered" | "shared";
  part: number;
  position: number;
  count: number;
  lag: number;
  lagBytes: number;
  consumedTotal: number;
  consumedBytesTotal: number;
  rate: number;
  lastSeen: number | null;
  shared?: { inFlight: number; redelivered: number; deadLettered: number; oldestUnacked: { part: number; offset: number; seq: number; deliveries?: number } | null };
}
export interface QueueSample {
  name: string;
  messages: number;
  bytes: number;
  parts: number;
  currentPart: number;
  producedTotal: number;
  producedBytesTotal: number;
  produceRate: number;
  consumeRate: number;
  consumedTotal: number;
  maxLag: number;
  maxLagConsumer: string | null;
  consumers: ConsumerSample[];
}
export interface MonitorSnapshot {
  at: number;
  sampleMs: number;
  startedAt: number;
  queues: QueueSample[];
}
export class Monitor {
  queues: QueueSample[] = [];
  async snapshot(): Promise<MonitorSnapshot> {
    return { at: Date.now(), sampleMs: 1000, startedAt: Date.now(), queues: this.queues };
  }
  close(): void {}
}
