// Options are checked against the command they reach before it runs. The argument parser
// underneath accepts any option and leaves those it does not know unread, so a typo
// (`--leese 5s`) would run the command without it: an exit 2 that names the option instead.
// Words past the arguments a command takes are refused the same way: `pause-writes 5s` would
// pause writes with no lease, `snapshot local` snapshot the leader, and an unquoted statement
// run only its first word. The root's --config given before a command (`svc --config F serve`)
// is handed to that command, which reads its own; --validate and --version take no command.

import type { ArgsDef, CommandDef, Resolvable } from "citty";
import { usageError } from "./_exit.ts";

async function resolve<T>(v: Resolvable<T> | undefined): Promise<T | undefined> {
  return typeof v === "function" ? await (v as () => T | Promise<T>)() : await v;
}

interface Seen {
  name: string;
  at: number;
  /** How many arguments it spans: 2 for `--opt value`. */
  span: number;
}

/** The arguments to run `root` with: `args` checked, and a root --config moved after its command. */
export async function checkedArgs(root: CommandDef, args: readonly string[]): Promise<string[]> {
  let cmd = root;
  let path = "svc";
  let defs = (await resolve(cmd.args)) ?? {};
  const rootSeen: Seen[] = [];
  let sub: CommandDef | null = null;
  const words: string[] = [];
  // The current command's options given a value: the argument parser keeps the last of two,
  // so `--until A --until B` would replay to B with nothing said.
  let withValue = new Set<string>();
  for (let i = 0; i < args.length; i++) {
    const a = args[i] ?? "";
    if (a === "--") {
      words.push(...args.slice(i + 1));
      break;
    }
    if (isOption(a)) {
      const name = optionName(a);
      const def = defs[name] ?? (name.startsWith("no-") ? booleanDef(defs, name.slice(3)) : undefined);
      if (def === undefined || def.type === "positional") {
        throw usageError(`unknown option ${a.split("=")[0]} for \`${path}\`; see \`${path} --help\``);
      }
      // A choice (enum) takes its value as a string does: `--consistency stale` is one option.
      const span = (def.type === "string" || def.type === "enum") && !a.includes("=") ? 2 : 1;
      if (span === 2 && i + 1 >= args.length) throw usageError(`${a} needs a value; see \`${path} --help\``);
      // An empty value is a variable left unset, not a choice to leave the option out: taken
      // as not given, `serve --config=$UNSET` started a new, empty lone node on the default ports.
      const value = span === 2 ? (args[i + 1] ?? "") : a.includes("=") ? a.slice(a.indexOf("=") + 1) : null;
      if ((def.type === "string" || def.type === "enum") && value !== null && value.trim() === "") {
        throw usageError(`--${name} is given an empty value: give it one, or leave the option out (is a shell variable unset?); see \`${path} --help\``);
      }
      if (def.type === "string" || def.type === "enum") {
        // The values are not repeated: one may be a secret pasted by mistake (token revoke --hash).
        if (withValue.has(name)) throw usageError(`--${name} is given twice: \`${path}\` takes one value; see \`${path} --help\``);
        withValue.add(name);
      }
      if (cmd === root) rootSeen.push({ name, at: i, span });
      i += span - 1;
      continue;
    }
    const subs = await resolve(cmd.subCommands);
    const next = subs?.[a];
    if (next === undefined) {
      // A word where a command is expected, by one that takes no positional arguments.
      if (subs !== undefined && !Object.values(defs).some((d) => d.type === "positional")) throw usageError(await unknownCommand(a, path, subs));
      words.push(a); // a positional argument
      continue;
    }
    cmd = (await resolve(next)) as CommandDef;
    if (sub === null && rootSeen.length > 0) sub = cmd;
    path = `${path} ${a}`;
    defs = (await resolve(cmd.args)) ?? {};
    words.length = 0;
    withValue = new Set();
  }
  // A group of commands given none (`svc admin`, `svc admin backup`): the argument parser's
  // "No command specified." names neither the group nor its --help.
  if (cmd !== root && cmd.run === undefined && (await resolve(cmd.subCommands)) !== undefined) {
    throw usageError(`no command given for \`${path}\`; see \`${path} --help\``);
  }
  const taken = Object.entries(defs).filter(([, d]) => d.type === "positional").map(([name]) => name.toUpperCase());
  const extra = words[taken.length];
  if (extra !== undefined) {
    const takes = taken.length === 0 ? "takes no arguments" : `takes ${taken.join(" ")} (quote a value with spaces)`;
    throw usageError(`unexpected argument "${extra}": \`${path}\` ${takes}; see \`${path} --help\``);
  }
  if (sub === null) return [...args];
  // Root options before a command: only --config means something there.
  const other = rootSeen.find((s) => s.name !== "config");
  if (other !== undefined) {
    throw usageError(`--${other.name} takes no command: \`svc --config FILE --validate\`, \`svc --version\`; see \`svc --help\``);
  }
  if (defs.config === undefined) throw usageError(`\`${path}\` takes no --config; see \`${path} --help\``);
  const given = rootSeen[0] as Seen;
  const out = [...args];
  const moved = out.splice(given.at, given.span);
  if (out.some((a) => a === "--config" || a.startsWith("--config="))) throw usageError("--config is given twice");
  const end = out.indexOf("--");
  out.splice(end === -1 ? out.length : end, 0, ...moved);
  return out;
}

/** "unknown command X for `svc`", naming the command of that name one level down (`svc admin X`) when there is one. */
async function unknownCommand(word: string, path: string, subs: Record<string, Resolvable<CommandDef>>): Promise<string> {
  for (const [name, def] of Object.entries(subs)) {
    const inner = await resolve(((await resolve(def)) as CommandDef).subCommands);
    if (inner?.[word] !== undefined) return `unknown command ${word} for \`${path}\`: it is \`${path} ${name} ${word}\`; see \`${path} ${name} ${word} --help\``;
  }
  return `unknown command ${word} for \`${path}\`; see \`${path} --help\``;
}

/** An option, not a value: `-x`, `--name`, `--name=v`; a statement such as "-- note\nSELECT 1" is not one. */
function isOption(a: string): boolean {
  return a.startsWith("-") && a !== "-" && !/\s/.test(a) && !/^-\d/.test(a);
}

function optionName(a: string): string {
  return a.replace(/^--?/, "").split("=")[0] ?? "";
}

function booleanDef(defs: ArgsDef, name: string): ArgsDef[string] | undefined {
  const def = defs[name];
  return def?.type === "boolean" ? def : undefined;
}
