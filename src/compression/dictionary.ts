import type { QueueDriver } from "../core/driver";
import { partDir } from "../storage/paths";

/**
 * A v3 part's zstd dictionary, `Q_dict` (docs/format.md#the-dictionary). Where the crate 0.3.x puts
 * it is not known: it builds the path from (base directory, queue name, part id). v-queue
 * writes it beside the part's records, the likeliest place, and looks there first, then in
 * the base directory under the two names such a path could plausibly take.
 */

export const DICT_MAX_BYTES = 16 * 1024;
/** A trained (ZDICT) dictionary starts with these bytes; anything else is raw content. Both are accepted. */
const TRAINED_MAGIC = [0x37, 0xa4, 0x30, 0xec];

/** `Q-<id>/Q_dict`: where v-queue writes a part's dictionary. */
export const dictPath = (queue: string, part: number): string => `${partDir(queue, part)}/${queue}_dict`;

/** Every place a part's dictionary is looked for, in order. */
export const dictPaths = (queue: string, part: number): string[] => [dictPath(queue, part), `${queue}_dict-${part}`, `${queue}_dict_${part}`];

export interface FoundDictionary {
  path: string;
  bytes: Uint8Array;
  trained: boolean;
}

/** The part's dictionary from the first place that has a non-empty one, or undefined. */
export async function findDictionary(driver: QueueDriver, queue: string, part: number): Promise<FoundDictionary | undefined> {
  for (const path of dictPaths(queue, part)) {
    // A storage error is thrown, not taken for "no dictionary": that would skip every compressed record of the part.
    const bytes = await driver.readRecord(path);
    if (bytes && bytes.length > 0) return { path, bytes, trained: TRAINED_MAGIC.every((b, i) => bytes[i] === b) };
  }
  return undefined;
}
