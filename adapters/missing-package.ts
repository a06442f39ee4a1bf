/** The npm package `name` itself is not installed (not a file or dependency of an installed one missing): for the optional peers. */
export function isMissingPackage(error: unknown, name: string): boolean {
  const { code, message } = (error ?? {}) as NodeJS.ErrnoException;
  return (code === "MODULE_NOT_FOUND" || code === "ERR_MODULE_NOT_FOUND") && new RegExp(`Cannot find (module|package) ['"]${name}[/'"]`).test(message ?? "");
}
