// `installPlayground(<dir>)` in its own process, for test/hosts/install.test.ts: prints `installed` once it returns.
import { installPlayground } from "./_host";

await installPlayground(process.argv[2]!, process.env);
console.log("installed");
