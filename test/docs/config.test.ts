import { describe, expect, it } from "vitest";
import { CONFIG_KEY_NAMES } from "../../adapters/config-schema";
import { readmeSection } from "../helpers/readme";

describe("the README's Configuration section", () => {
  it("names every key the config file takes", () => {
    expect(CONFIG_KEY_NAMES).toEqual(expect.arrayContaining(["dir", "durability", "auth", "limits", "metrics"]));
    const section = readmeSection("Configuration");
    expect(CONFIG_KEY_NAMES.filter((key) => !section.includes(`\`${key}\``))).toEqual([]);
  });
});
