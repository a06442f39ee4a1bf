/** What scripts/check-imports.ts checks: the rooms it reads, which way their imports go, and the cycles it lets pass for now. */

/** The folders whose `.ts` files are checked (the rooms of docs/architecture.md). */
export const ROOMS = ["src", "protocol", "runtime", "client", "adapters"];

/**
 * Which folders each folder may import from (besides itself), and why. A file belongs to the
 * longest folder named here that holds it, so a concept folder (`src/store`) can get a row of
 * its own; a folder with no row is not checked. `package.json` is the one file outside the
 * rooms that is imported (for the version).
 */
export const FOLDER_IMPORTS: Record<string, { may: string[]; why: string }> = {
  // The engine's rooms, bottom up: each imports only from rooms below it.
  "src/core": { may: [], why: "errors, names, option checks and the driver interface are the bottom of the engine" },
  "src/format": { may: ["src/core"], why: "the bytes of records, info lines and positions: no I/O" },
  "src/storage": { may: ["src/core", "src/format"], why: "paths, file handles, fencing and whole-file writes know no queue semantics" },
  "src/instances": { may: ["src/core", "src/storage"], why: "how instances ask each other for a holder sits on storage only" },
  "src/compression": { may: ["src/core", "src/format", "src/storage"], why: "codecs and dictionaries serve the log and the options" },
  "src/options": { may: ["src/core", "src/format", "src/compression"], why: "options are resolved once, before anything opens" },
  "src/log": {
    may: ["src/core", "src/format", "src/storage", "src/compression", "src/options"],
    why: "reading, scanning and recovering parts needs no consumer or writer",
  },
  "src/consumers/state": {
    may: ["src/core", "src/format", "src/storage"],
    why: "the consumers' files (position, journal, inbox) are read by inspect and partitions too",
  },
  "src/partitions": {
    may: ["src/core", "src/format", "src/storage", "src/instances", "src/options", "src/log", "src/consumers/state"],
    why: "partitions are a layout and a hand-out: the writers and consumers over them sit above",
  },
  "src/consumers": {
    may: ["src/core", "src/format", "src/storage", "src/options", "src/log", "src/consumers/state"],
    why: "the consumer kinds' shared types, below both kinds",
  },
  "src/inspect": {
    may: ["src/core", "src/format", "src/storage", "src/compression", "src/options", "src/log", "src/consumers/state", "src/consumers", "src/partitions"],
    why: "looking at a queue opens no writer or consumer",
  },
  "src/retention": {
    may: ["src/core", "src/format", "src/storage", "src/options", "src/log", "src/partitions", "src/inspect"],
    why: "retention reads what consumers still need; the writer runs it",
  },
  "src/writer": {
    may: ["src/core", "src/format", "src/storage", "src/instances", "src/compression", "src/options", "src/log", "src/partitions", "src/retention"],
    why: "the writer appends; consumers sit above it (dead letters are produced)",
  },
  "src/consumers/ordered": {
    may: [
      "src/core",
      "src/format",
      "src/storage",
      "src/instances",
      "src/options",
      "src/log",
      "src/consumers/state",
      "src/consumers",
      "src/partitions",
      "src/inspect",
    ],
    why: "an ordered consumer reads the log and saves its position",
  },
  "src/consumers/shared": {
    may: [
      "src/core",
      "src/format",
      "src/storage",
      "src/instances",
      "src/options",
      "src/log",
      "src/consumers/state",
      "src/consumers",
      "src/consumers/ordered",
      "src/partitions",
      "src/writer",
    ],
    why: "a leasing consumer reads through an ordered one and writes dead letters",
  },
  "src/admin": {
    may: ["src/core", "src/format", "src/storage", "src/options", "src/log", "src/partitions", "src/inspect"],
    why: "purge and delete take every lock of a queue: nothing below opens one through them",
  },
  src: {
    may: [
      "src/core",
      "src/format",
      "src/storage",
      "src/instances",
      "src/compression",
      "src/options",
      "src/log",
      "src/consumers/state",
      "src/partitions",
      "src/consumers",
      "src/inspect",
      "src/retention",
      "src/writer",
      "src/consumers/ordered",
      "src/consumers/shared",
      "src/admin",
    ],
    why: "the engine's entry (index.ts, open-consumer.ts) joins its rooms",
  },
  protocol: { may: ["src"], why: "the wire format is shared by the server, the client and the CLI: it imports none of them" },
  runtime: { may: ["src", "protocol", "package.json"], why: "the HTTP API takes a driver from its host: the hosts (adapters/) import it, not the reverse" },
  client: { may: ["protocol", "src"], why: "the client runs in browsers: it shares only the wire format and the engine's pure modules with the server" },
  adapters: { may: ["src", "protocol", "runtime", "client", "package.json"], why: "the hosts, drivers and CLI are the top room" },
};
