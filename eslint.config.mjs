import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["dist/**", "node_modules/**", "coverage/**", ".tmp/**", "playground/*/.output/**", "playground/*/node_modules/**", "playground/*/.nuxt/**", "playground/*/.nitro/**"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "no-console": "off",
    },
  },
  {
    // The engine runs anywhere (browser, edge, Node): it must not reach for Node built-ins.
    files: ["src/**/*.ts"],
    rules: {
      "no-restricted-imports": ["error", { patterns: [{ group: ["node:*"], message: "src/ is the portable engine: Node code belongs in adapters/." }] }],
    },
  },
);
