/** The engine, HTTP, client and crash test files under vitest on Bun (see _suite.ts). */
import { describeRuntimeSuite } from "./_suite";

describeRuntimeSuite("bun", [], 990);
