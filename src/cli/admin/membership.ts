// Membership commands, sent to the leader's admin port: add-node, set-member, remove-node,
// promote, transfer-leader. One voter changes at a time; a new node joins as a learner and is
// promoted once it has caught up.

import { defineCommand } from "citty";
import { NODE_ID_PATTERN, parseAddress } from "../../config/index.ts";
import { callNode, nodeArgs, nodeUrl, printJson, printKeyValues } from "../_client.ts";
import { usageError } from "../_exit.ts";

/**
 * What no node could be given is the command line's mistake, said before the node is asked
 * (and before add-node announces a wait): the node would refuse it, later and less plainly.
 */
function checkedId(id: string, option: "--id" | "--to"): string {
  if (!NODE_ID_PATTERN.test(id)) throw usageError(`${option} ${JSON.stringify(id)} is no node id: a node id is 1 to 64 characters of A-Z a-z 0-9 _ . - (node_id in that node's configuration)`);
  return id;
}

function checkedAddress(value: string, option: "--peer" | "--client" | "--admin"): string {
  const parsed = parseAddress(value);
  if (!parsed.ok) throw usageError(`${option}: ${parsed.message}`);
  return value;
}

const idArg = { id: { type: "string", description: "Node id", required: true, valueHint: "ID" } } as const;

export const addNodeCommand = defineCommand({
  meta: { name: "add-node", description: "Add a node: replicate its addresses, add it as a learner, promote it once caught up" },
  args: {
    ...idArg,
    peer: { type: "string", description: "Its peer address host:port", required: true },
    client: { type: "string", description: "Its client address host:port", required: true },
    admin: { type: "string", description: "Its admin address host:port", required: true },
    learner: { type: "boolean", description: "Leave it a non-voting learner" },
    ...nodeArgs,
  },
  async run({ args }) {
    checkedId(args.id, "--id");
    for (const k of ["peer", "client", "admin"] as const) checkedAddress(args[k], `--${k}`);
    // The wait is announced only for a node that is not a member yet: for one that is, the
    // leader's refusal is all there is to say.
    if (args.learner !== true && !(await isMemberAlready(nodeUrl(args), args.id))) {
      process.stderr.write(`adding ${args.id} as a learner; it becomes a voter once it has caught up (waiting up to 120 s; Ctrl-C leaves it a learner)\n`);
    }
    const r = await callNode(nodeUrl(args), "POST", "/admin/add-node", {
      id: args.id, peer: args.peer, client: args.client, admin: args.admin, learner: args.learner === true,
    }, 180_000);
    if (args.json) return printJson(r);
    printKeyValues(r as Record<string, unknown>);
  },
});

/** Whether the node asked lists `id` among the members (false when it cannot say). */
async function isMemberAlready(base: string, id: string): Promise<boolean> {
  try {
    const info = await callNode(base, "GET", "/admin/cluster-info", undefined, 10_000) as { members?: { id?: unknown }[] };
    return info.members?.some((m) => m.id === id) === true;
  } catch {
    return false;
  }
}

export const setMemberCommand = defineCommand({
  meta: { name: "set-member", description: "Change a member's addresses (it moved): replicated to every node, in place of [cluster] members" },
  args: {
    ...idArg,
    peer: { type: "string", description: "Its new peer address host:port" },
    client: { type: "string", description: "Its new client address host:port" },
    admin: { type: "string", description: "Its new admin address host:port" },
    ...nodeArgs,
  },
  async run({ args }) {
    const change = Object.fromEntries((["peer", "client", "admin"] as const).flatMap((k) => (args[k] === undefined || args[k] === "" ? [] : [[k, args[k]]])));
    if (Object.keys(change).length === 0) throw usageError("give at least one of --peer, --client and --admin");
    checkedId(args.id, "--id");
    for (const [k, v] of Object.entries(change)) checkedAddress(v, `--${k}` as "--peer" | "--client" | "--admin");
    const r = await callNode(nodeUrl(args), "POST", "/admin/set-member", { id: args.id, ...change }, 120_000);
    if (args.json) return printJson(r);
    printKeyValues(r as Record<string, unknown>);
  },
});

function simple(name: string, path: string, description: string) {
  return defineCommand({
    meta: { name, description },
    args: { ...idArg, ...nodeArgs },
    async run({ args }) {
      checkedId(args.id, "--id");
      const r = await callNode(nodeUrl(args), "POST", path, { id: args.id }, 120_000);
      if (args.json) return printJson(r);
      printKeyValues(r as Record<string, unknown>);
    },
  });
}

export const removeNodeCommand = simple("remove-node", "/admin/remove-node", "Remove a node from the cluster");
export const promoteCommand = simple("promote", "/admin/promote", "Promote a learner to voter");
export const transferLeaderCommand = defineCommand({
  meta: { name: "transfer-leader", description: "Hand leadership to another voter and wait until it leads" },
  args: { to: { type: "string", description: "The voter to lead", required: true, valueHint: "ID" }, ...nodeArgs },
  async run({ args }) {
    checkedId(args.to, "--to");
    const r = await callNode(nodeUrl(args), "POST", "/admin/transfer-leader", { id: args.to }, 60_000);
    if (args.json) return printJson(r);
    printKeyValues(r as Record<string, unknown>);
  },
});
