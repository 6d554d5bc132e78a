// Membership changes and leadership transfer, as the admin API asks for them: one voter change
// at a time through the Raft core, a new member added as a learner and promoted only once it
// caught up (so it never weakens the quorum while it copies the log).

import { majority, type MembershipChange } from "../raft/index.ts";
import { encodeCommand, type MemberAddress } from "../store/index.ts";
import { addressKey, isWildcardHost, parseAddress } from "../config/index.ts";
import { SvcError } from "../util/errors.ts";
import type { NodeContext } from "./context.ts";
import type { Proposer } from "./proposer.ts";

const catchUpPollMs = 50;
const transferPollMs = 20;

export class MembershipAdmin {
  constructor(private readonly ctx: NodeContext, private readonly proposer: Proposer) {}

  /**
   * Add a member: replicate its addresses, add it as a learner, and unless `learner` is
   * set, promote it to voter once it has caught up.
   */
  /**
   * `signal`: the request's; aborted (its caller went away, a Ctrl-C), the wait for the learner
   * to catch up ends and it stays a learner: a promotion the caller no longer waits for would
   * make a voter of a node the operator believes was not added.
   */
  async addMember(member: MemberAddress, options: { learner: boolean; catchUpTimeoutMs: number; signal?: AbortSignal }): Promise<{ index: number; role: "learner" | "voter" }> {
    const { ctx } = this;
    ctx.checkServing();
    ctx.requireLeader();
    // Refused before anything is replicated: the addresses go out first (the learner is dialled
    // there), and a member's own must not change on the way to a refusal.
    const { voters, learners } = ctx.core.status().membership;
    const members = [...voters, ...learners];
    if (members.includes(member.id)) {
      throw new SvcError("INVALID_CHANGE", `${member.id} is already a ${voters.includes(member.id) ? "voter" : "learner"} of the cluster; nothing was changed`, {
        hint: `to move it to other addresses, run \`svc admin set-member --id ${member.id} …\`; to promote a learner, \`svc admin promote --id ${member.id}\``,
      });
    }
    const book = ctx.memberAddresses();
    checkMemberAddresses(member, members.flatMap((m) => {
      const a = book.get(m);
      return a === undefined ? [] : [a];
    }));
    await this.proposer.propose(encodeCommand({ op: "set_member", member }));
    let { index } = await this.proposeChange({ kind: "add_learner", id: member.id });
    if (options.learner) return { index, role: "learner" };
    const deadlineMs = ctx.clock.nowMs() + options.catchUpTimeoutMs;
    for (;;) {
      const status = ctx.core.status();
      // Only a leader sees how far a member got: once leadership moved (a transfer, an election),
      // this node's view stands still, and waiting on it would end in a false timeout.
      if (status.role !== "leader") {
        ctx.logger.warn(`add-node: leadership moved to ${status.leaderId ?? "another member"} while ${member.id} caught up; it stays a learner`, { id: member.id, index });
        throw new SvcError("CATCH_UP_TIMEOUT", `${member.id} was added as a learner, but leadership moved to ${status.leaderId ?? "another member"} while it caught up: it stays a learner`, {
          hint: `svc admin promote --id ${member.id} (on any node) makes it a voter once it has caught up; svc admin remove-node --id ${member.id} undoes the addition`,
        });
      }
      // Removed meanwhile (remove-node while it caught up): there is nothing left to wait for.
      if (!status.membership.learners.includes(member.id) && !status.membership.voters.includes(member.id)) {
        throw new SvcError("INVALID_CHANGE", `${member.id} was added as a learner, then removed from the cluster while it caught up: it is not a member`, {
          hint: `to add it again, run \`svc admin add-node --id ${member.id} …\` once it runs on an empty data directory`,
        });
      }
      const match = status.progress[member.id]?.match ?? 0;
      if (match >= status.commit) break;
      if (options.signal?.aborted === true) {
        ctx.logger.warn(`add-node: the request was abandoned while ${member.id} caught up; it stays a learner`, { id: member.id, index, hint: `promote it with \`svc admin promote --id ${member.id}\`, or remove it with \`svc admin remove-node --id ${member.id}\`` });
        throw new SvcError("CATCH_UP_TIMEOUT", `the add-node request was abandoned while ${member.id} caught up: it stays a learner`, {
          hint: `svc admin promote --id ${member.id} makes it a voter; svc admin remove-node --id ${member.id} undoes the addition`,
        });
      }
      if (ctx.clock.nowMs() > deadlineMs) {
        // Why the link fails, when it does: a node that belongs to another cluster, say, refuses
        // the handshake, and no port check would show it.
        const link = ctx.io.network.linkStatus()[member.id];
        const failure = link !== undefined && !link.connected && link.lastFailure ? `; ${ctx.config.nodeId} cannot reach it: ${link.lastFailure}` : "";
        throw new SvcError("CATCH_UP_TIMEOUT", `${member.id} was added as a learner but did not catch up within ${options.catchUpTimeoutMs} ms (it holds ${match} of ${status.commit})${failure}`, {
          hint: failure !== ""
            ? `fix what keeps ${ctx.config.nodeId} from reaching ${member.id} (above), then run \`svc admin promote --id ${member.id}\`; to undo the addition, \`svc admin remove-node --id ${member.id}\``
            : `check that ${member.id} runs and can reach ${ctx.config.nodeId}'s peer port, then run \`svc admin promote --id ${member.id}\``,
        });
      }
      await ctx.clock.sleep(catchUpPollMs);
    }
    ({ index } = await this.proposeChange({ kind: "promote", id: member.id }));
    return { index, role: "voter" };
  }

  /** The set-member in progress: the next waits for it, so each reads the addresses the last one left. */
  private memberUpdate: Promise<unknown> = Promise.resolve();

  /**
   * Change a member's addresses (it moved to another host or port): replicated with set_member,
   * they take the place of what every node's [cluster] members says, and every node redials the
   * member there. Addresses not named stay as they are. One change at a time: a second waits
   * until the first is applied, then merges with what it left. The leader's own addresses are not
   * changed while it has other members: its followers would lose it (peer) or could no longer
   * forward to it (client, admin) the moment the change applies.
   */
  updateMember(id: string, change: { peer?: string; client?: string; admin?: string }): Promise<{ index: number; member: MemberAddress }> {
    const run = this.memberUpdate.then(() => this.updateMemberNow(id, change));
    this.memberUpdate = run.catch(() => undefined);
    return run;
  }

  private async updateMemberNow(id: string, change: { peer?: string; client?: string; admin?: string }): Promise<{ index: number; member: MemberAddress }> {
    const { ctx } = this;
    ctx.checkServing();
    ctx.requireLeader();
    const { voters, learners } = ctx.core.status().membership;
    const members = [...voters, ...learners];
    if (!members.includes(id)) {
      throw new SvcError("INVALID_CHANGE", `${id} is not a member of the cluster (voters: ${voters.join(", ")}${learners.length > 0 ? `; learners: ${learners.join(", ")}` : ""})`, {
        hint: "a new node is added with `svc admin add-node`",
      });
    }
    if (id === ctx.config.nodeId && members.length > 1) {
      throw new SvcError("INVALID_CHANGE", `${id} leads the cluster: changing its addresses would cut it off from its followers, or their forwarding from it`, {
        hint: `hand leadership over first (\`svc admin transfer-leader --to <another voter>\`), then change ${id}'s addresses`,
      });
    }
    const book = ctx.memberAddresses();
    const current = book.get(id);
    const peer = change.peer ?? current?.peer;
    const client = change.client ?? current?.client;
    const admin = change.admin ?? current?.admin;
    if (peer === undefined || client === undefined || admin === undefined) {
      throw new SvcError("INVALID_CHANGE", `no address of ${id} is known to the leader: give all three of peer, client and admin`, { hint: "see the members' addresses with `svc admin cluster-info`" });
    }
    const member: MemberAddress = { id, peer, client, admin };
    checkMemberAddresses(member, members.filter((m) => m !== id).flatMap((m) => {
      const a = book.get(m);
      return a === undefined ? [] : [a];
    }));
    // (The leader moves only itself, and only alone: it answers wherever it listens.)
    const moves = peer !== current?.peer && voters.includes(id) && id !== ctx.config.nodeId;
    if (moves) this.refuseMoveWithoutQuorum(id, voters);
    const { index } = await this.proposer.propose(encodeCommand({ op: "set_member", member }));
    if (moves) this.moved.add(id);
    ctx.logger.info("member addresses changed", { id, peer, client, admin, index, previous: current ?? null });
    return { index, member };
  }

  /** Voters whose peer address set-member changed: until this node connects to one there, it may not answer. */
  private readonly moved = new Set<string>();

  /**
   * A voter is reached at its new peer address only once it runs there: until this node has
   * connected to it there, it counts as gone. Refused (as a voter change is) when that leaves fewer than a majority of the voters
   * answering: two moves to addresses nothing listens on left a cluster with no leader, and no
   * leader to take a set-member back.
   */
  private refuseMoveWithoutQuorum(id: string, voters: readonly string[]): void {
    const { ctx } = this;
    const status = ctx.core.status();
    const tickMs = ctx.config.raft.heartbeatIntervalMs;
    // Moved: gone until this node's connection to its new address is up (what it sends over a
    // connection it opened before the move says nothing of the new address).
    const links = ctx.io.network.linkStatus();
    for (const v of this.moved) if (links[v]?.connected === true) this.moved.delete(v);
    const gone = voters.filter((v) => {
      if (v === id) return true;
      if (v === ctx.config.nodeId) return false;
      const sinceHeardMs = (status.progress[v]?.ticksSinceHeard ?? Number.POSITIVE_INFINITY) * tickMs;
      return sinceHeardMs > ctx.config.raft.electionTimeoutMs || this.moved.has(v);
    });
    const needed = majority(voters.length);
    if (voters.length - gone.length >= needed) return;
    const others = gone.filter((v) => v !== id);
    const answering = `moving ${id} to another peer address would leave ${voters.length - gone.length} of the ${voters.length} voters answering, fewer than the ${needed} a write needs, until it answers there`;
    if (others.length === 0) {
      // Two voters: each is needed for every write.
      throw new SvcError("INVALID_CHANGE", `${answering}: with ${voters.length} voters every one of them is needed`, {
        hint: `add a voter first (svc admin add-node), then move ${id}: an address nothing answers at would leave no majority to take the move back; nothing was changed`,
      });
    }
    throw new SvcError("INVALID_CHANGE", `${answering}: ` +
      `${others.join(", ")} ${others.length === 1 ? "has" : "have"} not answered within an election timeout, or ${others.length === 1 ? "is" : "are"} not reached yet at the address ${others.length === 1 ? "it was" : "they were"} moved to`, {
      hint: `start ${others.join(", ")} at ${others.length === 1 ? "its" : "their"} new address (or bring ${others.length === 1 ? "it" : "them"} back) first, then move ${id}; nothing was changed`,
    });
  }

  promoteMember(id: string): Promise<{ index: number }> {
    this.ctx.checkServing();
    return this.proposeChange({ kind: "promote", id });
  }

  removeMember(id: string): Promise<{ index: number }> {
    this.ctx.checkServing();
    return this.proposeChange({ kind: "remove", id });
  }

  /** Hand leadership to `to` and wait until it has it. */
  async transferLeader(to: string, timeoutMs: number): Promise<{ leader: string; term: number }> {
    const { ctx } = this;
    ctx.checkServing();
    // To the leader itself: it stays (calling off a transfer away in progress), and the wait
    // below ends at once (a script that moves leadership to a node retries safely).
    const r = ctx.core.transferLeadership(to);
    if (!r.ok) {
      if (r.code === "NOT_LEADER") throw ctx.notLeader(r.leaderId);
      throw new SvcError("INVALID_TRANSFER", r.reason, { hint: "pick a voter that is up to date (see `svc admin cluster-info`)" });
    }
    this.proposer.scheduled();
    const deadlineMs = ctx.clock.nowMs() + timeoutMs;
    for (;;) {
      const status = ctx.core.status();
      if (status.leaderId === to) return { leader: to, term: status.term };
      if (ctx.clock.nowMs() > deadlineMs) {
        throw new SvcError("TRANSFER_TIMEOUT", `leadership did not move to ${to} within ${timeoutMs} ms`, { hint: "check that it is running and caught up, then retry" });
      }
      await ctx.clock.sleep(transferPollMs);
    }
  }

  private async proposeChange(change: MembershipChange): Promise<{ index: number }> {
    const { ctx } = this;
    const r = ctx.core.proposeMembership(change, ctx.clock.nowMs());
    if (!r.ok) {
      if (r.code === "CHANGE_IN_PROGRESS") {
        throw new SvcError("CHANGE_IN_PROGRESS", "another membership change is still being committed", { hint: "retry in a moment" });
      }
      if (r.code === "INVALID_CHANGE") throw new SvcError("INVALID_CHANGE", `${change.kind} ${change.id}: ${r.reason}`, { hint: "see the current members with `svc admin cluster-info`" });
      throw this.proposer.proposeError(r);
    }
    this.proposer.scheduled();
    await ctx.waiters.wait(r.index, r.term, ctx.clock.nowMs());
    ctx.logger.info("membership changed", { change: change.kind, id: change.id, index: r.index });
    return { index: r.index };
  }
}

/**
 * A member's addresses must be dialable (not a bind-all address) and its own: no two of its
 * three the same, and none that another current member has, of any kind (hosts compared
 * without case).
 */
function checkMemberAddresses(member: MemberAddress, others: readonly MemberAddress[]): void {
  const kinds = ["peer", "client", "admin"] as const;
  const keyOf = (raw: string): string => {
    const parsed = parseAddress(raw);
    if (!parsed.ok) throw new SvcError("INVALID_CHANGE", `${member.id}'s address ${raw}: ${parsed.message}`, { hint: "give host:port" });
    if (isWildcardHost(parsed.address.host)) {
      throw new SvcError("INVALID_CHANGE", `${raw} listens on every interface; the other nodes cannot dial it`, { hint: "give the address the other nodes reach it at (its host name or IP address)" });
    }
    return addressKey(parsed.address);
  };
  const own = new Map<string, (typeof kinds)[number]>();
  for (const kind of kinds) {
    const key = keyOf(member[kind]);
    const same = own.get(key);
    if (same !== undefined) throw new SvcError("INVALID_CHANGE", `${member.id}'s ${same} and ${kind} addresses are the same (${member[kind]})`, { hint: "each port of a node is its own" });
    own.set(key, kind);
  }
  for (const other of others) {
    for (const kind of kinds) {
      const mine = own.get(addressKeyOrNull(other[kind]) ?? "");
      if (mine !== undefined) {
        throw new SvcError("INVALID_CHANGE", `${member[mine]} is ${other.id}'s ${kind} address`, { hint: "give the addresses the node itself listens on (its [listen] table); each member has its own" });
      }
    }
  }
}

function addressKeyOrNull(raw: string): string | null {
  const parsed = parseAddress(raw);
  return parsed.ok ? addressKey(parsed.address) : null;
}
