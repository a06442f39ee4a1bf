import type { CommandDef } from "citty";
import { browse } from "./browse";
import { consume, tail } from "./consume";
import { create } from "./create";
import { del } from "./delete";
import { dlq, redrive } from "./dlq";
import { events, outcome } from "./events";
import { ack, backoff, extend, lease, nack } from "./lease";
import { purge } from "./purge";
import { prune } from "./prune";
import { push } from "./push";
import { schedule } from "./schedule";
import { seek } from "./seek";
import { serve } from "./serve";
import { stat } from "./stat";

/** Every command of `v-queue`, by name. */
export const commands = {
  serve,
  create,
  push,
  consume,
  tail,
  seek,
  prune,
  schedule,
  stat,
  purge,
  delete: del,
  lease,
  ack,
  nack,
  extend,
  backoff,
  events,
  outcome,
  dlq,
  redrive,
  browse,
} as Record<string, CommandDef>;
