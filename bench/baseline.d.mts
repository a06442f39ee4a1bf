import type { Sample } from "./util";

/** Appends `count` records cycling through `pool`, as v-queue lays them out, with buffered writes. */
export function baselineAppend(file: string, pool: (string | Uint8Array)[], count: number): Sample;
/** The same appends with one promise per message, 1000 awaited together, as `push()` gives. */
export function baselineAppendPromised(file: string, pool: (string | Uint8Array)[], count: number): Promise<Sample>;
/** Reads them back: parses headers, checks crcs, decodes bodies; one reused buffer, or with `freshChunks` a new one per chunk. */
export function baselineRead(file: string, expected: number, freshChunks?: boolean): Sample;
