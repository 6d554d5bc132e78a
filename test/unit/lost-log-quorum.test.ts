// Too many voters lost their log: a member that lost entries it held does not vote, so when the
// voters that kept their log are fewer than a majority no leader can be elected. What says so
// names the members, and never speaks while an election can still succeed.

import { describe, expect, test } from "bun:test";
import { lostLogQuorum, lostLogQuorumSeen, lostLogQuorumText } from "../../src/node/index.ts";

const three = ["node3", "node1", "node2"];

describe("voters that lost their log", () => {
  test("one of three that lost its log leaves a majority to elect a leader: nothing to say", () => {
    expect(lostLogQuorum(three, (id) => id === "node2")).toBeNull();
    expect(lostLogQuorum(three, () => false)).toBeNull();
  });

  test("two of three that lost their log leave no majority: they are named, sorted, among the voters", () => {
    expect(lostLogQuorum(three, (id) => id !== "node1")).toEqual({ voters: ["node1", "node2", "node3"], lost: ["node2", "node3"] });
  });

  test("a lone voter is never held back by a lost log, so there is nothing to say", () => {
    expect(lostLogQuorum(["node1"], () => true)).toBeNull();
  });

  test("half of four voters that lost their log is not a majority, but still leaves too few to elect one", () => {
    const q = lostLogQuorum(["a", "b", "c", "d"], (id) => id === "a" || id === "b");
    expect(q).toEqual({ voters: ["a", "b", "c", "d"], lost: ["a", "b"] });
    expect(lostLogQuorumText(q!)).toStartWith("too many voters lost their log (a, b of a, b, c, d): no leader can be elected");
  });

  test("the text names what is wrong, who kept the log and the ways out: the WAL put back, a backup, or init-cluster --bootstrap on the member kept", () => {
    const text = lostLogQuorumText({ voters: ["node1", "node2", "node3"], lost: ["node2", "node3"] });
    expect(text).toStartWith("a majority of the voters lost their log (node2, node3 of node1, node2, node3): no leader can be elected");
    expect(text).toContain("the members that kept their log (node1) are fewer than a majority");
    expect(text).toContain("put its own segments back into raft/wal/");
    expect(text).toContain("remove raft/LOST_LOG");
    expect(text).toContain("restore every member from the newest full backup");
    expect(text).toContain("`svc admin init-cluster --bootstrap --force`");
  });

  test("when every voter lost its log, none is said to have kept it, and members restored by hand from one archive are told to run init-cluster --bootstrap on each", () => {
    const text = lostLogQuorumText({ voters: ["node1", "node2", "node3"], lost: ["node1", "node2", "node3"] });
    expect(text).toContain("run `svc admin init-cluster --bootstrap` on each");
    expect(lostLogQuorumText({ voters: ["node1", "node2", "node3"], lost: ["node2", "node3"] })).not.toContain("on each");
    expect(text).toContain("the members that kept their log (none)");
    expect(text).toContain("what they held after their own newest snapshots is gone but for what your backups hold");
  });

  test("seen through gossip: a member alive that leads in this node's term or later means a leader exists, whatever the count", () => {
    const member = (id: string, role: string, term: number, lostLog = false, state = "alive") => ({ id, state, record: { facts: { role, term, lostLog } } });
    const self = { id: "node2", lostLog: true, term: 4 };
    // node2 and node3 lost their log; node1 kept it and campaigns in vain.
    const campaigning = [member("node1", "pre_candidate", 4), member("node3", "follower", 4, true)];
    expect(lostLogQuorumSeen(three, self, campaigning)?.lost).toEqual(["node2", "node3"]);
    // node1 leads (node2 is only cut off from it on Raft): nothing to say.
    expect(lostLogQuorumSeen(three, self, [member("node1", "leader", 4), member("node3", "follower", 4, true)])).toBeNull();
    expect(lostLogQuorumSeen(three, self, [member("node1", "leader", 5), member("node3", "follower", 5, true)])).toBeNull();
    // A leader of an earlier term, or one gossip no longer hears, leads no more as far as this node can tell.
    expect(lostLogQuorumSeen(three, self, [member("node1", "leader", 3), member("node3", "follower", 4, true)])?.lost).toEqual(["node2", "node3"]);
    expect(lostLogQuorumSeen(three, self, [member("node1", "leader", 4, false, "dead"), member("node3", "follower", 4, true)])?.lost).toEqual(["node2", "node3"]);
    // A member that lost its log but is not alive by gossip may come back with it.
    expect(lostLogQuorumSeen(three, self, [member("node1", "pre_candidate", 4), member("node3", "follower", 4, true, "suspect")])).toBeNull();
  });
});
