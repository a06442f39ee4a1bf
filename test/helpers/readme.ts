import { readFileSync } from "node:fs";

/** A file of the project, by its path from the root. */
export const projectFile = (path: string): string => readFileSync(new URL(`../../${path}`, import.meta.url), "utf8");

/** A section of a Markdown file (`docs/operating.md`), from its `##` or `###` heading to the next heading; throws when there is none. */
export function docSection(file: string, title: string): string {
  const text = projectFile(file);
  const heading = new RegExp(`\\n#{2,3} ${title.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}\\n`).exec(text);
  if (!heading) throw new Error(`${file} has no section "## ${title}".`);
  return text.slice(heading.index + 1, text.indexOf("\n#", heading.index + 2));
}
