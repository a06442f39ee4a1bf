import { describe, expect, it } from "vitest";
import { CONFIG_KEY_NAMES } from "../../adapters/config-schema";
import { docSection } from "../helpers/readme";

describe("the Configuration section of docs/operating.md", () => {
  it("names every key the config file takes", () => {
    expect(CONFIG_KEY_NAMES).toEqual(expect.arrayContaining(["dir", "durability", "auth", "limits", "metrics"]));
    const section = docSection("docs/operating.md", "Configuration");
    expect(CONFIG_KEY_NAMES.filter((key) => !section.includes(`\`${key}\``))).toEqual([]);
  });
});
