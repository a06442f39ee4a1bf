/** ` (did you mean "x"?)`: the known name nearest to `name` when one or two edits away, else "". Shared by the config's keys and the CLI's flags. */
export function suggest(name: string, known: readonly string[]): string {
  let near: string | undefined;
  let best = 3;
  for (const candidate of known) {
    const d = distance(candidate.toLowerCase(), name.toLowerCase());
    if (d < best) [near, best] = [candidate, d];
  }
  return near === undefined ? "" : ` (did you mean "${near}"?)`;
}

/** Levenshtein distance. */
function distance(a: string, b: string): number {
  let row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++) next[j] = Math.min(row[j]! + 1, next[j - 1]! + 1, row[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    row = next;
  }
  return row[b.length]!;
}
