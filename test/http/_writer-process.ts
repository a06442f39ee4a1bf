/**
 * Another process writing a queue: `node --import jiti/register _writer-process.ts <dir> <queue> <delayMs> <message...>`.
 * Waits `delayMs`, pushes the messages (fsync), closes and exits.
 */
import { QueueWriter } from "../../src/writer/writer";
import fsDriver from "../../adapters/drivers/fs";
import { sleep } from "../helpers/sleep";

const [dir, queue, delay, ...messages] = process.argv.slice(2);
await sleep(Number(delay));
const writer = await QueueWriter.open(queue!, { driver: fsDriver({ dir }) });
await writer.pushBatch(messages);
await writer.close();
process.stdout.write("done\n");
