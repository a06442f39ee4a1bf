import { describe, expect, it } from "vitest";
import { projectFile, readmeSection } from "../helpers/readme";

/** The top-level keys of the server's config schema (`const config = object({...})` in adapters/config-schema.ts). */
function schemaKeys(): string[] {
  const body = /const config = object\(\{([\s\S]*?)\n\}\);/.exec(projectFile("adapters/config-schema.ts"));
  expect(body, "adapters/config-schema.ts declares the config's keys").not.toBeNull();
  return [...body![1]!.matchAll(/^\s+([a-zA-Z]+)\b/gm)].map((m) => m[1]!);
}

describe("the README's Configuration section", () => {
  it("names every key the config file takes", () => {
    const keys = schemaKeys();
    expect(keys).toEqual(expect.arrayContaining(["dir", "durability", "auth", "limits", "metrics"]));
    const section = readmeSection("Configuration");
    expect(keys.filter((key) => !section.includes(`\`${key}\``))).toEqual([]);
  });
});
