import type { ArgsDef } from "citty";
import { suggest } from "../suggest";
import { CliError } from "./_errors";

/** citty's own flags (and `-h`), answered before a command runs. */
const BUILTIN = ["help", "version"];

const camel = (name: string): string => name.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
const kebab = (name: string): string => name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);

/**
 * Refuses a flag that `command` does not take (`--dealy 5m`, `--prot 9096`): citty would read it
 * as a switch of its own and its value as one more positional. What it takes: each flag by its
 * name (kebab or camel case), `--no-<switch>`, its aliases (`-y`, clustered `-fy`), and
 * `--help`/`--version`. Everything after `--` is positional.
 */
export function checkFlags(rawArgs: readonly string[], args: ArgsDef, command: string): void {
  const flags = new Map<string, "string" | "boolean">();
  const shorts = new Map<string, "string" | "boolean">();
  for (const [name, def] of Object.entries(args)) {
    if (def.type === "positional") continue;
    const type = def.type === "boolean" ? "boolean" : "string";
    for (const variant of [name, camel(name), kebab(name)]) flags.set(variant, type);
    for (const alias of ["alias" in def ? (def.alias ?? []) : []].flat()) (alias.length === 1 ? shorts : flags).set(alias, type);
  }
  shorts.set("h", "boolean");
  const unknown = (flag: string): CliError => {
    const known = [...Object.keys(args).filter((name) => args[name]!.type !== "positional"), ...BUILTIN].map((name) => `--${name}`);
    return new CliError(`Unknown option ${flag} for "v-queue ${command}"${suggest(flag, known)}. See v-queue ${command} --help.`);
  };
  for (let i = 0; i < rawArgs.length; i++) {
    const arg = rawArgs[i]!;
    if (arg === "--") return;
    if (arg.startsWith("--")) {
      const [name, value] = [arg.slice(2).split("=")[0]!, arg.includes("=")];
      if (BUILTIN.includes(name)) continue;
      const negated = name.startsWith("no-") && flags.get(name.slice(3)) === "boolean";
      if (negated && !value) continue;
      const type = flags.get(name);
      if (type === undefined) throw unknown(`--${name}`);
      // A string flag's value is the next word, whatever it looks like.
      if (type === "string" && !value) i++;
    } else if (arg.startsWith("-") && arg.length > 1) {
      for (let j = 1; j < arg.length; j++) {
        const type = shorts.get(arg[j]!);
        if (type === undefined) throw unknown(`-${arg[j]}`);
        if (type === "string") {
          // The rest of the word is its value, or else the next word.
          if (j === arg.length - 1) i++;
          break;
        }
      }
    }
  }
}
