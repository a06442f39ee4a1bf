import { readFileSync } from "node:fs";

/** A file of the project, by its path from the root. */
export const projectFile = (path: string): string => readFileSync(new URL(`../../${path}`, import.meta.url), "utf8");

/** A `###` section of the README, from its heading to the next heading; throws when there is none. */
export function readmeSection(title: string): string {
  const readme = projectFile("README.md");
  const start = readme.indexOf(`\n### ${title}\n`);
  if (start < 0) throw new Error(`The README has no section "### ${title}".`);
  return readme.slice(start + 1, readme.indexOf("\n#", start + 2));
}
