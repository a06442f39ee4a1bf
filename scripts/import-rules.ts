/** What scripts/check-imports.ts checks: the rooms it reads, which way their imports go, and the cycles it lets pass for now. */

/** The folders whose `.ts` files are checked (the rooms of the README's architecture). */
export const ROOMS = ["src", "protocol", "runtime", "client", "adapters"];

/**
 * Which folders each folder may import from (besides itself), and why. A file belongs to the
 * longest folder named here that holds it, so a concept folder (`src/store`) can get a row of
 * its own; a folder with no row is not checked. `package.json` is the one file outside the
 * rooms that is imported (for the version).
 */
export const FOLDER_IMPORTS: Record<string, { may: string[]; why: string }> = {
  src: { may: [], why: "the portable engine is the bottom room" },
  protocol: { may: ["src"], why: "the wire format is shared by the server, the client and the CLI: it imports none of them" },
  runtime: { may: ["src", "protocol", "package.json"], why: "the HTTP API takes a driver from its host: the hosts (adapters/) import it, not the reverse" },
  client: { may: ["protocol", "src"], why: "the client runs in browsers: it shares only the wire format and the engine's pure modules with the server" },
  adapters: { may: ["src", "protocol", "runtime", "client", "package.json"], why: "the hosts, drivers and CLI are the top room" },
};

