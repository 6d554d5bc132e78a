// Where a node's [cluster] members disagrees with the cluster's membership and the addresses it
// replicated (add-node, set-member).

import { describe, expect, test } from "bun:test";
import { parseAddress, type Member } from "../../src/config/index.ts";
import { configDrift } from "../../src/node/config-drift.ts";

function fileMember(id: string, n: number): Member {
  const at = (port: number) => {
    const p = parseAddress(`10.0.0.${n}:${port}`);
    if (!p.ok) throw new Error(p.message);
    return p.address;
  };
  return { id, peer: at(7879), client: at(7878), admin: at(9090) };
}

const addresses = (id: string, n: number) => ({ id, peer: `10.0.0.${n}:7879`, client: `10.0.0.${n}:7878`, admin: `10.0.0.${n}:9090` });
const file = [fileMember("node1", 1), fileMember("node2", 2), fileMember("node3", 3)];

describe("config drift", () => {
  test("a file that lists every member, with no addresses replicated, agrees with the cluster", () => {
    expect(configDrift("node1", file, { voters: ["node1", "node2", "node3"], learners: [] }, [])).toEqual([]);
  });

  test("a member added at run time that the file leaves out is named with the addresses the cluster replicated", () => {
    const node4 = addresses("node4", 4);
    expect(configDrift("node1", file, { voters: ["node1", "node2", "node3"], learners: ["node4"] }, [node4])).toEqual([{ id: "node4", inFile: null, replicated: node4 }]);
  });

  test("a member the file leaves out and the cluster replicated nothing for is named with neither", () => {
    expect(configDrift("node1", file.slice(0, 2), { voters: ["node1", "node2", "node3"], learners: [] }, [])).toEqual([{ id: "node3", inFile: null, replicated: null }]);
  });

  test("a member the file lists at other addresses than the cluster replicated is named with both, this node too", () => {
    const moved = { ...addresses("node1", 1), peer: "10.0.0.9:7879" };
    expect(configDrift("node1", file, { voters: ["node1", "node2", "node3"], learners: [] }, [moved])).toEqual([
      { id: "node1", inFile: addresses("node1", 1), replicated: moved },
    ]);
  });

  test("replicated addresses the file states alike, hosts in another case, and members no longer in the cluster are no drift", () => {
    const same = { ...addresses("node2", 2) };
    const gone = addresses("node9", 9);
    const upper = fileMember("node3", 3);
    const named = { ...addresses("node3", 3) };
    expect(configDrift("node1", [file[0]!, file[1]!, upper], { voters: ["node1", "node2", "node3"], learners: [] }, [same, gone, named])).toEqual([]);
  });

  test("a lone node run from a file with no members is not told to list itself", () => {
    expect(configDrift("node1", [], { voters: ["node1"], learners: [] }, [])).toEqual([]);
  });
});
