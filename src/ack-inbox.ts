import { crc32Ascii } from "./crc32";
import type { QueueDriver } from "./driver";
import type { QueueProblem } from "./errors";
import { sharedInboxDir } from "./paths";
import { line, messageKey, type MessageKey } from "./shared-state";
import { writeWhole } from "./write-whole";

/**
 * Acks taken by an instance that does not hold the shared consumer they are for (README,
 * "Partitioned queues"): its partition was handed over since the leases went out, or the
 * request reached another instance (Nitro's `node-cluster` hands each connection to any
 * worker). That instance writes them, durably, into the consumer's inbox, a directory of small
 * files (`Q_info_wanta_C/<instance>-<seq>`), each written whole once and never changed. The
 * holder reads the inbox when it opens and every `INBOX_CHECK_MS`, acknowledges what it finds
 * (shared-consumer.ts), and removes a file once its acks are in its journal: a crash in between
 * applies them again, which changes nothing. Lines: `A;<part>;<offset>;<lease>;<crc>\n`.
 */

/** How often a holder looks into its inbox: an ack waits this long at most, its lease runs far longer. */
export const INBOX_CHECK_MS = 500;

/** One file of an inbox: an instance id, a dash, its sequence number (a temporary file of a write has another shape). */
const FILE_NAME = /^[0-9a-z]{1,64}-\d{1,15}$/;

let written = 0;

/** An ack as an inbox line names it. */
export interface InboxAck {
  key: MessageKey;
  part: number;
  offset: number;
  lease: number;
}

/** Writes `acks` into the inbox of consumer `consumer` of `queue`, as one new file of instance `from`; resolves once stored (fsync'd with `sync`). */
export async function postAcks(driver: QueueDriver, queue: string, consumer: string, from: string, acks: readonly Omit<InboxAck, "key">[], sync: boolean): Promise<void> {
  const dir = sharedInboxDir(queue, consumer);
  const body = acks.map((ack) => line(`A;${ack.part};${ack.offset};${ack.lease};`)).join("");
  await driver.mkdir(dir);
  await writeWhole(driver, `${dir}/${from}-${++written}`, new TextEncoder().encode(body), sync);
  if (sync) await driver.syncDir?.(dir);
}

/** The inbox's files and their acks (a damaged line is skipped and told). */
export async function readInbox(driver: QueueDriver, queue: string, consumer: string, onProblem: (problem: QueueProblem) => void): Promise<{ files: string[]; acks: InboxAck[] }> {
  const dir = sharedInboxDir(queue, consumer);
  const names = (await driver.list(dir)).filter((name) => FILE_NAME.test(name));
  const files: string[] = [];
  const acks: InboxAck[] = [];
  let bad = 0;
  for (const name of names) {
    const path = `${dir}/${name}`;
    const bytes = await driver.readRecord(path);
    // Gone: applied and removed by a holder meanwhile. Empty: being written by a driver without
    // `writeAtomic` (made, then filled), left for the next round.
    if (bytes === undefined || bytes.length === 0) continue;
    files.push(path);
    for (const raw of new TextDecoder().decode(bytes).split("\n")) {
      if (raw === "") continue;
      const cut = raw.lastIndexOf(";") + 1;
      const fields = raw.slice(0, cut);
      const [kind, part, offset, lease] = fields.split(";").map((field, i) => (i === 0 ? field : Number(field))) as [string, number, number, number];
      if (cut === 0 || String(crc32Ascii(fields)) !== raw.slice(cut) || kind !== "A" || ![part, offset, lease].every(Number.isSafeInteger)) {
        bad++;
        continue;
      }
      acks.push({ key: messageKey(part, offset), part, offset, lease });
    }
  }
  if (bad > 0) onProblem({ code: "BAD_INFO", queue, message: `Shared consumer "${consumer}": skipped ${bad} damaged line(s) of its ack inbox (${dir}).` });
  return { files, acks };
}

/** Removes inbox files whose acks are written (each written once and never changed: nothing newer is lost). */
export async function clearInbox(driver: QueueDriver, files: readonly string[]): Promise<void> {
  for (const path of files) await driver.remove(path);
}
