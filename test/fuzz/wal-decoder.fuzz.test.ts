// Fuzz: the WAL segment decoder (scanSegment), the WAL's open and replay (Wal.open on a temp
// dir) and the hard state reader. Damaged input is reported — a damage offset inside the
// file, WAL_CORRUPT, HARDSTATE_CORRUPT — never an uncaught exception and never a silent
// wrong entry: whatever survives bytes changed under their CRCs is what was written, from its
// start or from a segment that starts the log over. Records re-framed with a valid CRC around
// a changed payload (which no CRC can catch) must still decode to well-formed values or be
// refused.

import { afterAll, beforeAll, expect, test } from "bun:test";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Wal, listSegments, parseSegmentName, readHardState, scanSegment, writeHardState, type StoredHardState } from "../../src/storage/index.ts";
import { decodeRecordAt, encodeRecord } from "../../src/storage/_record.ts";
import { SvcError } from "../../src/util/errors.ts";
import { encodeMembership, type Entry } from "../../src/util/log-data.ts";
import { silentLogger } from "../../src/util/logger.ts";
import { fuzzPlan, runCases, type Gen } from "./_gen.ts";

const plan = fuzzPlan("wal-decoder", 400);
const root = fs.mkdtempSync(join(tmpdir(), "svc-fuzz-wal-"));
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

const segmentSizeBytes = 1024;
const original: Entry[] = [];
/** The segment files the original log wrote: name and bytes. */
let segments: { name: string; bytes: Uint8Array }[] = [];
let hardState: Uint8Array = new Uint8Array();
const hardStateValue: StoredHardState = { term: 7, vote: "node2", commit: 41, clusterId: "c-5e1f" };

beforeAll(() => {
  const dir = join(root, "original");
  const { wal } = Wal.open(dir, { segmentSizeBytes, logger: silentLogger });
  for (let index = 1; index <= 40; index++) {
    const term = 1 + Math.floor(index / 9);
    const kind = index % 13 === 0 ? "config" : index % 9 === 0 ? "noop" : "normal";
    const data = kind === "config" ? encodeMembership({ voters: ["node1", "node2"], learners: [] })
      : kind === "noop" ? new Uint8Array() : new TextEncoder().encode(`{"sql":"INSERT INTO t VALUES (${index})"}`.repeat(1 + (index % 3)));
    const entry: Entry = { term, index, kind, timestampMs: 1_700_000_000_000 + index * 1000, data };
    original.push(entry);
    wal.append([entry]);
  }
  wal.sync();
  wal.close();
  segments = listSegments(dir).map((s) => ({ name: s.name, bytes: new Uint8Array(fs.readFileSync(s.path)) }));
  const hsPath = join(root, "hardstate");
  writeHardState(hsPath, hardStateValue);
  hardState = new Uint8Array(fs.readFileSync(hsPath));
});

function sameEntry(a: Entry, b: Entry): boolean {
  return a.index === b.index && a.term === b.term && a.kind === b.kind && a.timestampMs === b.timestampMs && Buffer.from(a.data).equals(Buffer.from(b.data));
}

function describeEntry(e: Entry): string {
  return `#${e.index} t${e.term} ${e.kind} ${e.timestampMs} ${e.data.length}B`;
}

/** Offsets of a segment's records (header first), as the writer made them. */
function recordOffsets(bytes: Uint8Array): number[] {
  const out: number[] = [];
  let at = 0;
  for (;;) {
    const r = decodeRecordAt(bytes, at);
    if (r.kind !== "record") return out;
    out.push(at);
    at = r.end;
  }
}

/** One record whose payload changed, re-framed with a valid CRC: no checksum can tell. */
function reframed(gen: Gen, bytes: Uint8Array): Uint8Array {
  const offsets = recordOffsets(bytes);
  const at = gen.pick(offsets);
  const r = decodeRecordAt(bytes, at);
  if (r.kind !== "record") return bytes;
  const payload = gen.mutateBytes(r.payload);
  const type = gen.chance(0.1) ? gen.int(256) : r.type;
  const tail = bytes.subarray(r.end);
  const record = encodeRecord(type, payload);
  const out = new Uint8Array(at + record.length + tail.length);
  out.set(bytes.subarray(0, at));
  out.set(record, at);
  out.set(tail, at + record.length);
  return out;
}

type Mode = "bytes" | "reframed" | "random";

function checkEntryShape(e: Entry, where: string): void {
  for (const [k, v] of [["index", e.index], ["term", e.term], ["timestampMs", e.timestampMs]] as const) {
    if (!Number.isSafeInteger(v) || v < 0) throw new Error(`${where}: entry ${k} ${v} is not an integer svc can hold exactly`);
  }
  if (e.index < 1 || e.term < 1) throw new Error(`${where}: entry ${describeEntry(e)} has index or term 0`);
}

function checkScan(bytes: Uint8Array, mode: Mode): void {
  let scan;
  try {
    scan = scanSegment(bytes);
  } catch (e) {
    throw new Error(`scanSegment threw ${e instanceof Error ? `${e.name}: ${e.message}` : String(e)}`);
  }
  if (scan.damage !== null) {
    const d = scan.damage;
    if (!(Number.isInteger(d.offset) && d.offset >= 0 && d.offset <= bytes.length)) throw new Error(`damage offset ${d.offset} outside a ${bytes.length}-byte file`);
    if (d.reason === "") throw new Error("damage without a reason");
  }
  if (!(scan.dataEndBytes >= 0 && scan.dataEndBytes <= bytes.length)) throw new Error(`records end at ${scan.dataEndBytes} of ${bytes.length} bytes`);
  for (const e of scan.entries) {
    checkEntryShape(e, "scanSegment");
    if (mode === "bytes" && !original.some((o) => sameEntry(o, e))) throw new Error(`scanSegment decoded an entry never written: ${describeEntry(e)}`);
  }
}

function checkOpen(dir: string, mode: Mode): void {
  let opened;
  try {
    opened = Wal.open(dir, { segmentSizeBytes, logger: silentLogger });
  } catch (e) {
    if (e instanceof SvcError && e.code === "WAL_CORRUPT") {
      if (!e.message.includes(dir)) throw new Error(`WAL_CORRUPT names no file: ${e.message}`);
      return;
    }
    throw new Error(`Wal.open threw ${e instanceof SvcError ? e.code : e instanceof Error ? e.name : ""}: ${e instanceof Error ? e.message : String(e)}`);
  }
  opened.wal.close();
  const { entries } = opened;
  entries.forEach((e, i) => {
    checkEntryShape(e, "Wal.open");
    const previous = entries[i - 1];
    if (previous !== undefined && e.index !== previous.index + 1) throw new Error(`Wal.open replayed ${describeEntry(previous)} then ${describeEntry(e)}`);
  });
  if (mode !== "bytes") return;
  // A prefix of the log; or, where a segment starts the log over (as after a snapshot install),
  // a run from that segment's first index: the node sees where its log starts and refuses a gap
  // no snapshot covers (LOG_GAP).
  const start = (entries[0]?.index ?? 1) - 1;
  if (start !== 0 && !segments.some((seg) => parseSegmentName(seg.name)?.firstIndex === start + 1)) {
    throw new Error(`Wal.open replayed a log starting at ${start + 1}, where no segment starts`);
  }
  entries.forEach((e, i) => {
    const o = original[start + i];
    if (o === undefined || !sameEntry(o, e)) throw new Error(`Wal.open replayed ${describeEntry(e)} at position ${i}, where the log held ${o === undefined ? "nothing" : describeEntry(o)}`);
  });
}

function checkHardState(path: string, mode: Mode): void {
  let state;
  try {
    state = readHardState(path);
  } catch (e) {
    if (e instanceof SvcError && e.code === "HARDSTATE_CORRUPT") return;
    throw new Error(`readHardState threw ${e instanceof Error ? `${e.name}: ${e.message}` : String(e)}`);
  }
  if (state === null) throw new Error("readHardState found no file where one is");
  if (mode === "bytes" && JSON.stringify(state) !== JSON.stringify(hardStateValue)) throw new Error(`readHardState gave ${JSON.stringify(state)}, not what was written`);
  const ok = Number.isSafeInteger(state.term) && state.term >= 0 && Number.isSafeInteger(state.commit) && state.commit >= 0 &&
    (state.vote === null || (typeof state.vote === "string" && state.vote !== "")) && typeof state.clusterId === "string";
  if (!ok) throw new Error(`readHardState accepted ${JSON.stringify(state)}`);
}

test("damaged WAL segments and hard states are reported, never replayed wrong", async () => {
  const counts = { bytes: 0, reframed: 0, random: 0, hardStates: 0 };
  const cases = await runCases(plan, (gen) => {
    const dir = join(root, `case-${gen.seed}`);
    fs.mkdirSync(dir);
    try {
      if (gen.chance(0.25)) {
        const mode: Mode = gen.chance(0.5) ? "bytes" : gen.chance(0.8) ? "reframed" : "random";
        const bytes = mode === "bytes" ? gen.mutateBytes(hardState) : mode === "random" ? gen.randomBytes(200)
          : encodeRecord(gen.chance(0.9) ? hardState[8] ?? 0 : gen.int(256), new TextEncoder().encode(gen.mutateText(JSON.stringify({ format: 1, ...hardStateValue }), [], ["null", "true", "[]", "{}", "\"\"", "-1", "1.5", "format", "term", "commit", "vote", "clusterId"])));
        gen.note(bytes);
        const path = join(dir, "hardstate");
        fs.writeFileSync(path, bytes);
        checkHardState(path, mode);
        counts.hardStates++;
        return;
      }
      const mode: Mode = gen.chance(0.7) ? "bytes" : gen.chance(0.7) ? "reframed" : "random";
      counts[mode]++;
      const victim = gen.int(segments.length);
      const files = segments.map((s, i) => {
        if (i !== victim) return s;
        const bytes = mode === "bytes" ? gen.mutateBytes(s.bytes, segments.map((x) => x.bytes)) : mode === "reframed" ? reframed(gen, s.bytes) : gen.randomBytes(2048);
        return { name: s.name, bytes };
      });
      const mutated = files[victim]?.bytes ?? new Uint8Array();
      gen.note(mutated);
      checkScan(mutated, mode);
      for (const f of files) fs.writeFileSync(join(dir, f.name), f.bytes);
      checkOpen(dir, mode);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
  console.log(`fuzz wal-decoder: ${cases} cases ${JSON.stringify(counts)}`);
  expect(cases).toBe(plan.seeds.length);
}, 600_000);

test("the log the fuzz damages spans several segments and replays whole", () => {
  expect(segments.length).toBeGreaterThan(2);
  const dir = join(root, "whole");
  for (const s of segments) {
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(join(dir, s.name), s.bytes);
  }
  const { wal, entries } = Wal.open(dir, { segmentSizeBytes, logger: silentLogger });
  wal.close();
  expect(entries.length).toBe(original.length);
  expect(readHardState(join(root, "hardstate"))).toEqual(hardStateValue);
});

test("an entry record holding a term, index or time beyond 2^53 is malformed, not rounded", () => {
  // Found by seeds 338 (index 2^63), 1223 (time), 1916 (term): re-framed records read as other numbers.
  const [first] = segments;
  if (first === undefined) throw new Error("no segment");
  const [, entryAt] = recordOffsets(first.bytes);
  if (entryAt === undefined) throw new Error("no entry record");
  for (const field of [0, 8, 16]) {
    const r = decodeRecordAt(first.bytes, entryAt);
    if (r.kind !== "record") throw new Error("unreadable record");
    const payload = r.payload.slice();
    new DataView(payload.buffer).setUint32(field, 0x20_0000, true);
    const bytes = Uint8Array.from(first.bytes);
    bytes.set(encodeRecord(r.type, payload), entryAt);
    const scan = scanSegment(bytes);
    expect(scan.entries).toEqual([]);
    expect(scan.damage).toMatchObject({ offset: entryAt, reason: "malformed entry record" });
  }
});

test("a hard state whose record is whole but whose values are not is HARDSTATE_CORRUPT", () => {
  // Found by seeds 1706 (term 2^63), 2434 (commit 1e400), 2963 (term 1.8e308); the rest read the same way.
  const path = join(root, "hardstate-regression");
  const type = hardState[8] ?? 0;
  const payloads = [
    "null", "[]", "7", '"x"',
    '{"format":1,"term":9223372036854775807,"vote":"node2","commit":41,"clusterId":"c"}',
    '{"format":1,"term":7,"vote":"node2","commit":1e400,"clusterId":"c"}',
    '{"format":1,"term":-1,"vote":null,"commit":0,"clusterId":"c"}',
    '{"format":1,"term":1.5,"vote":null,"commit":0,"clusterId":"c"}',
    '{"format":1,"term":7,"vote":5,"commit":0,"clusterId":"c"}',
    '{"format":1,"term":7,"commit":0,"clusterId":"c"}',
    '{"format":1,"term":7,"vote":"","commit":0,"clusterId":"c"}',
  ];
  for (const payload of payloads) {
    fs.writeFileSync(path, encodeRecord(type, new TextEncoder().encode(payload)));
    let code = "none";
    try {
      readHardState(path);
    } catch (e) {
      code = e instanceof SvcError ? e.code : `${(e as Error).name}: ${(e as Error).message}`;
    }
    expect(`${payload} → ${code}`).toBe(`${payload} → HARDSTATE_CORRUPT`);
  }
  fs.writeFileSync(path, encodeRecord(type, new TextEncoder().encode('{"format":1,"term":7,"vote":null,"commit":0,"clusterId":""}')));
  expect(readHardState(path)).toEqual({ term: 7, vote: null, commit: 0, clusterId: "" });
});
