import { describeEngineOnDriver } from "./engine-suite";
import memoryDriver from "../../adapters/drivers/memory";

let n = 0;
describeEngineOnDriver("memory", () => {
  const name = `test-${++n}`;
  return { driver: memoryDriver({ name }), reopen: () => memoryDriver({ name }) };
});
