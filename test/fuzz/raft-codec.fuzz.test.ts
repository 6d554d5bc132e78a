// Fuzz: the Raft message codec (decodeMessage). For any bytes it never throws: garbage is
// refused with a code and an offset inside the input, and what it accepts is exactly what was
// sent — encoding the decoded message gives back the same bytes, so no field was silently
// changed on the way in (an id, a number, an entry's data).

import { expect, test } from "bun:test";
import { decodeMessage, encodeMessage, type Message } from "../../src/raft/index.ts";
import { encodeMembership } from "../../src/util/log-data.ts";
import { fuzzPlan, runCases, type Gen } from "./_gen.ts";

const plan = fuzzPlan("raft-codec", 3_000);

const te = new TextEncoder();
const env = { from: "node1", to: "node-2.example", term: 7 };
const messages: Message[] = [
  { ...env, type: "pre_vote", lastIndex: 41, lastTerm: 6 },
  { ...env, type: "vote", lastIndex: 2 ** 53 - 1, lastTerm: 6, transfer: true },
  { ...env, type: "pre_vote_response", reject: false },
  { ...env, type: "vote_response", reject: true },
  {
    ...env, type: "append", prevIndex: 40, prevTerm: 6, commit: 39,
    entries: [
      { term: 7, index: 41, kind: "normal", timestampMs: 1_700_000_000_000, data: te.encode('{"statements":[{"sql":"INSERT INTO t VALUES (?)","params":[1]}]}') },
      { term: 7, index: 42, kind: "config", timestampMs: 1_700_000_000_001, data: encodeMembership({ voters: ["node1", "node2"], learners: ["node3"] }) },
      { term: 7, index: 43, kind: "noop", timestampMs: 0, data: new Uint8Array() },
    ],
  },
  { ...env, type: "append", prevIndex: 0, prevTerm: 0, commit: 0, entries: [] },
  { ...env, type: "append_response", reject: true, index: 40, hintIndex: 12, hintTerm: 3 },
  { ...env, type: "heartbeat", commit: 39, readSeq: 12 },
  { ...env, type: "heartbeat_response", readSeq: 12 },
  { ...env, type: "heartbeat_response", readSeq: 12, diskFull: true },
  { ...env, type: "snapshot", snapshot: { index: 1000, term: 5, membership: { voters: ["node1", "ünï", "n3"], learners: [] } } },
  { ...env, type: "timeout_now" },
  { ...env, from: "", to: "", type: "read_index", requestId: 99 },
  { ...env, type: "read_index_response", requestId: 99, index: 44 },
];
const corpus = messages.map(encodeMessage);
const codes = new Set(["TRUNCATED", "BAD_VERSION", "UNKNOWN_TYPE", "BAD_VALUE", "TRAILING_BYTES"]);

function hex(b: Uint8Array): string {
  return Buffer.from(b).toString("hex");
}

/** A message whose ids were mutated as text: the codec must carry them unchanged. */
function withMutatedIds(gen: Gen, m: Message): Message {
  const id = (s: string): string => gen.mutateText(s, ["node1", "n2"], ["node1", "\ufeff", "\u0000"]).slice(0, 300);
  const out = { ...m, from: id(m.from), to: id(m.to) } as Message;
  if (out.type !== "snapshot") return out;
  const membership = out.snapshot.membership;
  return { ...out, snapshot: { ...out.snapshot, membership: { voters: membership.voters.map(id), learners: membership.learners.map(id) } } };
}

test("decodeMessage refuses garbage with a code and accepts only what encodes back to the same bytes", async () => {
  let accepted = 0;
  let structured = 0;
  const cases = await runCases(plan, (gen) => {
    if (gen.chance(0.2)) {
      const m = withMutatedIds(gen, gen.pick(messages));
      // Ids come from validated configuration: a lone surrogate never reaches the codec.
      const ids = [m.from, m.to, ...(m.type === "snapshot" ? [...m.snapshot.membership.voters, ...m.snapshot.membership.learners] : [])];
      if (!ids.every((id) => id.isWellFormed())) return;
      let encoded: Uint8Array;
      try {
        encoded = encodeMessage(m);
      } catch {
        return; // an id longer than the codec allows: the core never makes one
      }
      gen.note(encoded);
      structured++;
      const back = decodeMessage(encoded);
      if (!back.ok || JSON.stringify(back.message) !== JSON.stringify(m)) {
        throw new Error(`${JSON.stringify(m)} came back as ${JSON.stringify(back)}`);
      }
      return;
    }
    const bytes = gen.chance(0.1) ? gen.randomBytes(300) : gen.mutateBytes(gen.pick(corpus), corpus);
    gen.note(bytes);
    let result;
    try {
      result = decodeMessage(bytes);
    } catch (e) {
      throw new Error(`decodeMessage threw ${e instanceof Error ? `${e.name}: ${e.message}` : String(e)}`);
    }
    if (!result.ok) {
      const { code, offset, detail } = result.error;
      if (!codes.has(code)) throw new Error(`refused with an unknown code ${code}`);
      if (!(Number.isInteger(offset) && offset >= 0 && offset <= bytes.length)) throw new Error(`refused at offset ${offset} of ${bytes.length} bytes`);
      if (detail === "") throw new Error(`refused with ${code} and no detail`);
      return;
    }
    accepted++;
    let again: Uint8Array;
    try {
      again = encodeMessage(result.message);
    } catch (e) {
      throw new Error(`a decoded message does not encode: ${e instanceof Error ? e.message : String(e)}`);
    }
    if (hex(again) !== hex(bytes)) throw new Error(`decoded ${JSON.stringify(result.message)}, which encodes to other bytes: ${hex(again).slice(0, 200)}`);
  });
  console.log(`fuzz raft-codec: ${cases} cases, ${accepted} mutated and accepted, ${structured} with mutated ids`);
  expect(cases).toBe(plan.seeds.length);
}, 600_000);

test("every message the fuzz starts from decodes back to itself", () => {
  for (const m of messages) expect(decodeMessage(encodeMessage(m))).toEqual({ ok: true, message: m });
});

test("an id that starts with U+FEFF keeps it through the codec", () => {
  // Found by seed 216: "\ufeff" as the sender's id came back as "".
  for (const from of ["\ufeff", "\ufeffnode1", "node1\ufeff"]) {
    const m: Message = { from, to: "\ufeffn2", term: 1, type: "timeout_now" };
    expect(decodeMessage(encodeMessage(m))).toEqual({ ok: true, message: m });
  }
});
