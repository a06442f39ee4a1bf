import js from "@eslint/js";
import tseslint from "typescript-eslint";

const QUERY_RULE = "Read the query with a QueryParam (runtime/query.ts) listed in the route's `query`, so that the OpenAPI document lists it.";

/** A folder's import bans, as `no-restricted-imports` patterns (which folder imports which: scripts/import-rules.ts). */
const room = (files, ...patterns) => ({ files, rules: { "no-restricted-imports": ["error", { patterns }] } });

export default tseslint.config(
  {
    ignores: [
      "dist/**",
      "node_modules/**",
      "coverage/**",
      ".tmp/**",
      "playground/*/.output/**",
      "playground/*/node_modules/**",
      "playground/*/.nuxt/**",
      "playground/*/.nitro/**",
    ],
  },
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
        [
          "window",
          "document",
          "location",
          "navigator",
          "fetch",
          "Request",
          "URL",
          "setTimeout",
          "clearTimeout",
          "AbortController",
          "DOMException",
          "URLSearchParams",
          "Intl",
          "performance",
          "getComputedStyle",
          "ResizeObserver",
          "EventSource",
          "TextEncoder",
          "atob",
          "HTMLElement",
          "globalThis",
        ].map((name) => [name, "readonly"]),
      ),
    },
  },
  // The rooms of the architecture (README) that run beyond Node: no Node built-ins. Which room
  // imports which, and that no module imports itself through others, is checked after eslint
  // by scripts/check-imports.ts (`npm run lint`).
  room(["src/**/*.ts"], { group: ["node:*"], message: "src/ is the portable engine: Node code belongs in adapters/." }),
  room(["protocol/**/*.ts"], { group: ["node:*"], message: "protocol/ runs wherever the client does: no Node built-ins." }),
  room(["runtime/**/*.ts"], { group: ["node:*"], message: "runtime/ is web-standard: Node code belongs in adapters/." }),
  room(["client/**/*.ts"], { group: ["node:*"], message: "v-queue/client runs in browsers and workers: no Node built-ins." }),
  // A route reads its query only through the QueryParams it lists (runtime/query.ts), which the OpenAPI document lists too.
  {
    files: ["runtime/routes/**/*.ts"],
    rules: {
      "no-restricted-properties": ["error", { property: "searchParams", message: QUERY_RULE }],
      "no-restricted-imports": [
        "error",
        {
          patterns: [{ group: ["node:*"], message: "runtime/ is web-standard: Node code belongs in adapters/." }],
          paths: [{ name: "h3", importNames: ["getQuery", "getValidatedQuery"], message: QUERY_RULE }],
        },
      ],
    },
  },
);
