// Membership changes and leadership transfer, as the admin API asks for them: one voter change
// at a time through the Raft core, a new member added as a learner and promoted only once it
// caught up (so it never weakens the quorum while it copies the log).

import type { MembershipChange } from "../raft/index.ts";
import { encodeCommand, type MemberAddress } from "../store/index.ts";
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
  async addMember(member: MemberAddress, options: { learner: boolean; catchUpTimeoutMs: number }): Promise<{ index: number; role: "learner" | "voter" }> {
    const { ctx } = this;
    ctx.checkServing();
    ctx.requireLeader();
    await this.proposer.propose(encodeCommand({ op: "set_member", member }));
    let { index } = await this.proposeChange({ kind: "add_learner", id: member.id });
    if (options.learner) return { index, role: "learner" };
    const deadlineMs = ctx.clock.nowMs() + options.catchUpTimeoutMs;
    for (;;) {
      const status = ctx.core.status();
      const match = status.progress[member.id]?.match ?? 0;
      if (match >= status.commit) break;
      if (ctx.clock.nowMs() > deadlineMs) {
        throw new SvcError("CATCH_UP_TIMEOUT", `${member.id} was added as a learner but did not catch up within ${options.catchUpTimeoutMs} ms (it holds ${match} of ${status.commit})`, {
          hint: `check that ${member.id} runs and can reach ${ctx.config.nodeId}'s peer port, then run \`svc admin promote --id ${member.id}\``,
        });
      }
      await ctx.clock.sleep(catchUpPollMs);
    }
    ({ index } = await this.proposeChange({ kind: "promote", id: member.id }));
    return { index, role: "voter" };
  }

  /**
   * Change a member's addresses (it moved to another host or port): replicated with set_member,
   * they take the place of what every node's [cluster] members says, and every node redials the
   * member there. Addresses not named stay as they are. The leader's own peer address is not
   * changed while other voters follow it: they would lose it the moment the change applies.
   */
  async updateMember(id: string, change: { peer?: string; client?: string; admin?: string }): Promise<{ index: number; member: MemberAddress }> {
    const { ctx } = this;
    ctx.checkServing();
    ctx.requireLeader();
    const status = ctx.core.status();
    const { voters, learners } = status.membership;
    if (!voters.includes(id) && !learners.includes(id)) {
      throw new SvcError("INVALID_CHANGE", `${id} is not a member of the cluster (voters: ${voters.join(", ")}${learners.length > 0 ? `; learners: ${learners.join(", ")}` : ""})`, {
        hint: "a new node is added with `svc admin add-node`",
      });
    }
    if (id === ctx.config.nodeId && change.peer !== undefined && voters.length > 1) {
      throw new SvcError("INVALID_CHANGE", `${id} leads the cluster: changing its peer address would cut it off from its followers`, {
        hint: `hand leadership over first (\`svc admin transfer-leader --to <another voter>\`), then change ${id}'s address`,
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
    // An address another member has would send that member's traffic here, or this one's there.
    for (const [other, a] of book) {
      if (other === id) continue;
      for (const [kind, value] of Object.entries(change)) {
        if (value === a[kind as keyof typeof change]) {
          throw new SvcError("INVALID_CHANGE", `${value} is ${other}'s ${kind} address`, { hint: "give the address the moved member listens on (its [listen] table)" });
        }
      }
    }
    const member: MemberAddress = { id, peer, client, admin };
    const { index } = await this.proposer.propose(encodeCommand({ op: "set_member", member }));
    ctx.logger.info("member addresses changed", { id, peer, client, admin, index, previous: current ?? null });
    return { index, member };
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
