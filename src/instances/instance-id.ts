/** A random id of one instance: who wrote a marker (a holder ignores its own). */
export function instanceId(): string {
  return Array.from(crypto.getRandomValues(new Uint8Array(8)), (b) => b.toString(16).padStart(2, "0")).join("");
}
