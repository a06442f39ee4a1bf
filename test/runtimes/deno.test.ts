/** The runtime-specific test files (drivers, locks, HTTP, client, crashes) under vitest on Deno: see _suite.ts. */
import { describeRuntimeSuite } from "./_suite";

describeRuntimeSuite(
  "deno",
  [
    {
      file: "test/http/serve-cli.test.ts",
      why: "Deno's node:child_process reports a child that caught SIGTERM and exited 0 as killed by SIGTERM (exit code null); test/runtimes/serve.test.ts checks serve's SIGTERM on Deno from Node",
    },
  ],
  480,
);
