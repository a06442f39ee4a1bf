/** The one sleep of the tests and their child processes: the engine's. */
export { sleep } from "../../src/core/sleep";
