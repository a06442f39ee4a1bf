/* global process, console */
// The standalone server for `npm run bench -- runtimes`, as plain JavaScript so that Node, Bun
// and Deno run the very same file (the built dist/, no TypeScript loader in the measured process).
import { serveQueues } from "../dist/server.mjs";

const server = await serveQueues({
  dir: process.env.VQ_BENCH_HTTP_DIR,
  port: 0,
  durability: process.env.VQ_BENCH_HTTP_DURABILITY || "interval",
  syncCommits: false,
  handleSignals: true,
});
console.log(JSON.stringify({ port: server.port }));
