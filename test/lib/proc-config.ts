// Configurations for the nodes a test starts: one node that bootstraps its own cluster, or
// N nodes that know each other, all on loopback with free ports and data under a temp dir.

import { join } from "node:path";
import type { ConfigDraft, MemberDraft } from "../../src/config/index.ts";
import { freePorts } from "./proc-ports.ts";

export interface NodeAddresses {
  nodeId: string;
  client: string;
  admin: string;
  peer: string;
}

export type DraftOverrides = Omit<Partial<ConfigDraft>, "nodeId" | "listen" | "cluster">;

async function addressesFor(nodeId: string): Promise<NodeAddresses> {
  const [client, admin, peer] = await freePorts(3);
  return { nodeId, client: `127.0.0.1:${client}`, admin: `127.0.0.1:${admin}`, peer: `127.0.0.1:${peer}` };
}

function member(a: NodeAddresses): MemberDraft {
  return { id: a.nodeId, peer: a.peer, client: a.client, admin: a.admin };
}

/** One node on free loopback ports that bootstraps a cluster of itself; data in `<dir>/<nodeId>`. */
export async function singleNodeConfig(dir: string, overrides: DraftOverrides = {}, nodeId = "node1"): Promise<ConfigDraft> {
  const a = await addressesFor(nodeId);
  return {
    dataDir: join(dir, nodeId),
    ...overrides,
    nodeId,
    listen: { client: a.client, admin: a.admin, peer: a.peer },
    cluster: { bootstrap: true, members: [member(a)] },
  };
}

/**
 * `count` nodes (node1…nodeN) that list each other as members; only node1 bootstraps, as an
 * operator starts a new cluster. Data of each in `<dir>/<nodeId>`.
 */
export async function clusterConfigs(dir: string, count: number, overrides: DraftOverrides = {}): Promise<ConfigDraft[]> {
  const addresses: NodeAddresses[] = [];
  for (let i = 1; i <= count; i++) addresses.push(await addressesFor(`node${i}`));
  const members = addresses.map(member);
  return addresses.map((a, i) => ({
    dataDir: join(dir, a.nodeId),
    ...overrides,
    nodeId: a.nodeId,
    listen: { client: a.client, admin: a.admin, peer: a.peer },
    cluster: { bootstrap: i === 0, members },
  }));
}

/** "host:port" of an address as a draft holds it. */
export function addressText(a: string | { raw: string } | undefined, what: string): string {
  if (a === undefined) throw new Error(`the configuration has no ${what} address`);
  return typeof a === "string" ? a : a.raw;
}
