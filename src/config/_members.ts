// Reads cluster.members: an array of {id, peer, client, admin}, written as inline tables or
// as [[cluster.members]] tables. Cross-member checks (duplicates) live in _checks.ts.

import { checkUnknownKeys, describeValue, isTable, readAddress, readString, type TomlTable } from "./_read.ts";
import type { Problems } from "./_problems.ts";
import { MEMBER_FIELDS, NODE_ID_PATTERN } from "./schema.ts";
import type { Member } from "./types.ts";
import { assert } from "../util/index.ts";

const ADDRESS_KEYS = ["peer", "client", "admin"] as const;

/** The members read without problems, each with its index in the file (for messages). */
export type IndexedMember = { readonly index: number; readonly member: Member };

export interface MembersRead {
  /** Entries read without any problem. */
  readonly members: IndexedMember[];
  /** The ids of all entries whose id was valid, even when another of their keys was not. */
  readonly ids: string[];
}

export function readMembers(cluster: TomlTable, problems: Problems): MembersRead | undefined {
  const value = cluster["members"];
  if (value === undefined) return { members: [], ids: [] };
  if (!Array.isArray(value)) {
    problems.add(["cluster", "members"], `expected an array of { id, peer, client, admin } tables, got ${describeValue(value)}`);
    return undefined;
  }
  const members: IndexedMember[] = [];
  const ids: string[] = [];
  value.forEach((entry: unknown, index) => {
    const path = ["cluster", "members", index];
    if (!isTable(entry)) {
      problems.add(path, `expected a table { id = "...", peer = "host:port", client = "host:port", admin = "host:port" }, got ${describeValue(entry)}`);
      return;
    }
    checkUnknownKeys(entry, MEMBER_FIELDS, path, problems);
    const idSpec = MEMBER_FIELDS["id"];
    assert(idSpec?.kind === "string", "member id is a string field");
    const id = readString(entry, "id", idSpec, path, problems);
    const idValid = id !== undefined && NODE_ID_PATTERN.test(id);
    if (id !== undefined && !idValid) {
      problems.add([...path, "id"], `must be 1 to 64 characters of A-Z a-z 0-9 _ . -, got ${JSON.stringify(id)}`);
    }
    if (idValid) ids.push(id);
    const addresses = ADDRESS_KEYS.map((key) => {
      const spec = MEMBER_FIELDS[key];
      assert(spec?.kind === "address", "member addresses are address fields");
      return readAddress(entry, key, spec, path, problems);
    });
    const [peer, client, admin] = addresses;
    // An unknown key beside valid values does not hide the member from the cross-member checks.
    if (idValid && peer !== undefined && client !== undefined && admin !== undefined) {
      members.push({ index, member: { id, peer, client, admin } });
    }
  });
  return { members, ids };
}
