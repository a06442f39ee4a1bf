import js from "@eslint/js";
import tseslint from "typescript-eslint";

/** A folder's import bans, as `no-restricted-imports` patterns. */
const room = (files, ...patterns) => ({ files, rules: { "no-restricted-imports": ["error", { patterns }] } });

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
  // The dashboard's page code runs in browsers, as plain modules (no build step but hashing).
  {
    files: ["dashboard/**/*.js"],
    languageOptions: {
      sourceType: "module",
      globals: Object.fromEntries(
        ["window", "document", "location", "navigator", "fetch", "Request", "URL", "setTimeout", "clearTimeout", "AbortController", "DOMException", "URLSearchParams", "Intl", "performance", "getComputedStyle", "ResizeObserver", "TextEncoder", "atob", "HTMLElement", "globalThis"].map((name) => [name, "readonly"]),
      ),
    },
  },
  // The rooms of the architecture (README): what each may not import, and why.
  // The engine runs anywhere (browser, edge, Node) and is the bottom room.
  room(
    ["src/**/*.ts"],
    { group: ["node:*"], message: "src/ is the portable engine: Node code belongs in adapters/." },
    { group: ["../**"], message: "src/ is the bottom room: it imports nothing of protocol/, runtime/, client/ or adapters/." },
  ),
  // The wire format is shared by the server, the client and the CLI: it imports none of them.
  room(
    ["protocol/**/*.ts"],
    { group: ["node:*"], message: "protocol/ runs wherever the client does: no Node built-ins." },
    { group: ["**/runtime/**", "**/client/**", "**/adapters/**"], message: "protocol/ is below the server, the client and the CLI: they import it, not the reverse." },
  ),
  // The HTTP API runs in any host with web-standard Request/Response (Nitro, Nuxt, workers):
  // it takes a driver from its host, and knows nothing of the hosts, the CLI or the client.
  room(
    ["runtime/**/*.ts"],
    { group: ["node:*"], message: "runtime/ is web-standard: Node code belongs in adapters/." },
    { group: ["**/adapters/**", "**/client/**"], message: "runtime/ imports src/ and protocol/ only: the hosts (adapters/) import it, not the reverse." },
  ),
  // The client runs in browsers: the wire format from protocol/, nothing of the server's.
  room(
    ["client/**/*.ts"],
    { group: ["node:*"], message: "v-queue/client runs in browsers and workers: no Node built-ins." },
    { group: ["**/runtime/**", "**/adapters/**"], message: "The client shares only protocol/ (and the engine's pure types) with the server." },
  ),
);
