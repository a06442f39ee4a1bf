/** The runtime-specific test files (drivers, locks, HTTP, client, crashes) under vitest on Bun: see _suite.ts. */
import { describeRuntimeSuite } from "./_suite";

describeRuntimeSuite("bun", [], 490);
