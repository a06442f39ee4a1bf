import { describeEngine } from "./utils";
import memoryDriver from "../../adapters/drivers/memory";

let n = 0;
describeEngine("memory", () => {
  const name = `test-${++n}`;
  return { driver: memoryDriver({ name }), reopen: () => memoryDriver({ name }) };
});
