// TEMPORARY until branch shared-http lands: the client methods of the shared-consumer contract.
import type { VQueueClient } from "../../client/index";
import type { Printable } from "./_print";

export interface LeaseResult {
  acked?: number;
  nacked?: number;
  extended?: number;
  errors: { lease: string; code: string; message: string }[];
}

export interface SharedClient {
  lease(queue: string, consumer: string, o: { max?: number; leaseMs?: number; timeoutMs?: number }): Promise<(Printable & { lease: string; deliveries: number; leaseUntil: number })[]>;
  ack(queue: string, consumer: string, leases: string[]): Promise<LeaseResult>;
  nack(queue: string, consumer: string, leases: string[], o: { delayMs?: number; error?: string; deadLetter?: true }): Promise<LeaseResult>;
  extend(queue: string, consumer: string, leases: string[], o: { leaseMs?: number }): Promise<{ extended: { lease: string; leaseUntil: number }[]; errors: LeaseResult["errors"] }>;
  redrive(dlq: string, o: { to?: string; max?: number }): Promise<{ moved: number }>;
}

export const sharedClient = (client: VQueueClient): SharedClient => client as unknown as SharedClient;
