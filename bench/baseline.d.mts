import type { Sample } from "./util";

/** Appends `count` records cycling through `pool`, as v-queue lays them out, with buffered writes. */
export function baselineAppend(file: string, pool: (string | Uint8Array)[], count: number): Sample;
/** Reads them back: parses headers, checks crcs, decodes bodies. */
export function baselineRead(file: string, expected: number): Sample;
