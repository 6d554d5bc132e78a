// Fuzz: the snapshot readers — a snapshot directory's meta.json (readSnapshotMeta) and the
// transfer's chunk and acknowledgement decoders (decodeChunk, decodeAck). They never throw;
// what they cannot read is null; what they return is well-formed in every field the node goes
// on to use (indexes and sizes whole numbers, ids strings, a membership of id lists, a chunk's
// bytes inside its snapshot), so that nothing downstream meets a value of the wrong kind.

import { afterAll, expect, test } from "bun:test";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { decodeAck, decodeChunk, encodeChunk, type Ack, type ChunkHeader } from "../../src/node/_snapshot-wire.ts";
import { readSnapshotMeta, snapshotMetaFile, type SnapshotFileMeta } from "../../src/storage/index.ts";
import { fuzzPlan, runCases, type Gen } from "./_gen.ts";

const plan = fuzzPlan("snapshot-meta", 1_500);
const dir = fs.mkdtempSync(join(tmpdir(), "svc-fuzz-snapshot-"));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

const te = new TextEncoder();
const membership = { voters: ["node1", "node2", "node3"], learners: ["node4"] };
const meta: SnapshotFileMeta = {
  formatVersion: 1, clusterId: "3f2a-cluster", index: 1200, term: 4, membership,
  createdAt: "2026-11-22T22:00:00.000Z", stateSha256: "ab".repeat(32), stateSizeBytes: 123_456,
};
const header: ChunkHeader = {
  from: "node1", to: "node2", term: 5, meta: { index: 1200, term: 4, membership }, clusterId: "3f2a-cluster",
  createdAt: "2026-11-22T22:00:00.000Z", sha256: "ab".repeat(32), totalBytes: 3_000_000, offset: 1_048_576, crc32: 0xdeadbeef,
};
const acks: Ack[] = [
  { term: 4, index: 1200, receivedBytes: 1_048_576, status: "progress" },
  { term: 4, index: 1200, receivedBytes: 3_000_000, status: "done" },
  { term: 4, index: 1200, receivedBytes: 0, status: "failed", reason: "ENOSPC: no space left on device" },
];
const words = [
  "null", "true", "false", "[]", "{}", "\"\"", "-1", "1.5", "1e400", "\"1200\"", "index", "term", "membership", "voters", "learners",
  "formatVersion", "stateSha256", "offset", "totalBytes", "receivedBytes", "status", "done", "failed", "progress", "meta", "../..",
  "__proto__", "constructor",
];

const isCount = (v: unknown): boolean => typeof v === "number" && Number.isSafeInteger(v) && v >= 0;
const isIds = (v: unknown): boolean => Array.isArray(v) && v.every((id) => typeof id === "string");

function wrongMembership(m: unknown): string | null {
  if (typeof m !== "object" || m === null) return `membership ${JSON.stringify(m)}`;
  const { voters, learners } = m as { voters?: unknown; learners?: unknown };
  return isIds(voters) && isIds(learners) ? null : `membership ${JSON.stringify(m)}`;
}

/**
 * The first field of a returned value that is not what its type says; null when all are.
 * Fields older files may lack (clusterId, createdAt, stateSizeBytes) may be absent.
 */
function wrongInMeta(m: SnapshotFileMeta): string | null {
  for (const k of ["formatVersion", "index", "term"] as const) if (!isCount(m[k])) return `${k} ${JSON.stringify(m[k])}`;
  if (typeof m.stateSha256 !== "string") return `stateSha256 ${JSON.stringify(m.stateSha256)}`;
  if (m.stateSizeBytes !== undefined && !isCount(m.stateSizeBytes)) return `stateSizeBytes ${JSON.stringify(m.stateSizeBytes)}`;
  for (const k of ["clusterId", "createdAt"] as const) if (m[k] !== undefined && typeof m[k] !== "string") return `${k} ${JSON.stringify(m[k])}`;
  return wrongMembership(m.membership);
}

function wrongInChunk(h: ChunkHeader, data: Uint8Array): string | null {
  for (const k of ["term", "totalBytes", "offset"] as const) if (!isCount(h[k])) return `${k} ${JSON.stringify(h[k])}`;
  if (!(Number.isInteger(h.crc32) && h.crc32 >= 0 && h.crc32 <= 0xffff_ffff)) return `crc32 ${JSON.stringify(h.crc32)}`;
  for (const k of ["from", "to", "clusterId", "createdAt", "sha256"] as const) if (typeof h[k] !== "string") return `${k} ${JSON.stringify(h[k])}`;
  if (typeof h.meta !== "object" || h.meta === null) return `meta ${JSON.stringify(h.meta)}`;
  if (!isCount(h.meta.index) || !isCount(h.meta.term)) return `meta ${JSON.stringify(h.meta)}`;
  const wrong = wrongMembership(h.meta.membership);
  if (wrong !== null) return wrong;
  if (h.offset + data.length > h.totalBytes) return `${data.length} bytes at ${h.offset} of a ${h.totalBytes}-byte snapshot`;
  return null;
}

function wrongInAck(a: Ack): string | null {
  for (const k of ["term", "index", "receivedBytes"] as const) if (!isCount(a[k])) return `${k} ${JSON.stringify(a[k])}`;
  if (!["progress", "done", "failed"].includes(a.status)) return `status ${JSON.stringify(a.status)}`;
  if (a.reason !== undefined && typeof a.reason !== "string") return `reason ${JSON.stringify(a.reason)}`;
  return null;
}

function neverThrows<T>(what: string, f: () => T): T {
  try {
    return f();
  } catch (e) {
    throw new Error(`${what} threw ${e instanceof Error ? `${e.name}: ${e.message}` : String(e)}`);
  }
}

/** JSON text mutated as text, or its bytes mutated (invalid UTF-8 included). */
function mutatedJson(gen: Gen, value: unknown): Uint8Array {
  const text = JSON.stringify(value);
  if (gen.chance(0.05)) return gen.randomBytes(300);
  return gen.chance(0.5) ? te.encode(gen.mutateText(text, [], words)) : gen.mutateBytes(te.encode(text));
}

test("snapshot meta, chunks and acknowledgements are read well-formed or not at all", async () => {
  const counts = { metas: 0, metasRead: 0, chunks: 0, chunksRead: 0, acks: 0, acksRead: 0 };
  const cases = await runCases(plan, (gen) => {
    const kind = gen.int(3);
    if (kind === 0) {
      counts.metas++;
      const bytes = mutatedJson(gen, meta);
      gen.note(bytes);
      const snapshotDir = join(dir, `case-${gen.seed}`);
      fs.mkdirSync(snapshotDir);
      try {
        fs.writeFileSync(join(snapshotDir, snapshotMetaFile), bytes);
        const read = neverThrows("readSnapshotMeta", () => readSnapshotMeta(snapshotDir));
        if (read === null) return;
        counts.metasRead++;
        const wrong = wrongInMeta(read);
        if (wrong !== null) throw new Error(`readSnapshotMeta returned a meta with ${wrong}`);
      } finally {
        fs.rmSync(snapshotDir, { recursive: true, force: true });
      }
    } else if (kind === 1) {
      counts.chunks++;
      const data = gen.randomBytes(64);
      const framed = encodeChunk(header, data);
      const headerBytes = framed.length - data.length - 4;
      let payload: Uint8Array;
      if (gen.chance(0.5)) {
        // The header's JSON mutated, framed with its right length.
        const h = mutatedJson(gen, header);
        payload = new Uint8Array(4 + h.length + data.length);
        new DataView(payload.buffer).setUint32(0, h.length, true);
        payload.set(h, 4);
        payload.set(data, 4 + h.length);
      } else {
        payload = gen.mutateBytes(framed);
      }
      gen.note(payload);
      const read = neverThrows("decodeChunk", () => decodeChunk(payload));
      if (read === null) return;
      counts.chunksRead++;
      const wrong = wrongInChunk(read.header, read.data);
      if (wrong !== null) throw new Error(`decodeChunk returned a chunk with ${wrong} (header ${headerBytes} bytes)`);
    } else {
      counts.acks++;
      const bytes = mutatedJson(gen, gen.pick(acks));
      gen.note(bytes);
      const read = neverThrows("decodeAck", () => decodeAck(bytes));
      if (read === null) return;
      counts.acksRead++;
      const wrong = wrongInAck(read);
      if (wrong !== null) throw new Error(`decodeAck returned an acknowledgement with ${wrong}`);
    }
  });
  console.log(`fuzz snapshot-meta: ${cases} cases ${JSON.stringify(counts)}`);
  expect(cases).toBe(plan.seeds.length);
}, 600_000);

test("the meta, chunk and acknowledgements the fuzz starts from read back as written", () => {
  const snapshotDir = join(dir, "valid");
  fs.mkdirSync(snapshotDir);
  fs.writeFileSync(join(snapshotDir, snapshotMetaFile), JSON.stringify(meta));
  expect(readSnapshotMeta(snapshotDir)).toEqual(meta);
  const data = te.encode("state bytes");
  expect(decodeChunk(encodeChunk(header, data))).toEqual({ header, data });
  for (const a of acks) expect(decodeAck(te.encode(JSON.stringify(a)))).toEqual(a);
});

test("a meta.json with a field of the wrong kind is unreadable, not passed on", () => {
  const snapshotDir = join(dir, "regression");
  fs.mkdirSync(snapshotDir, { recursive: true });
  const variants: unknown[] = [
    { ...meta, membership: { voters: 5, learners: [] } },
    { ...meta, membership: {} },
    { ...meta, index: 1.5 },
    { ...meta, stateSizeBytes: "123" },
    { ...meta, clusterId: null },
    { ...meta, createdAt: 5 },
    { ...meta, stateSha256: undefined },
    { ...meta, membership: { voters: ["a"], learners: [1] } },
    [meta],
    null,
  ];
  for (const v of variants) {
    fs.writeFileSync(join(snapshotDir, snapshotMetaFile), JSON.stringify(v) ?? "");
    expect(readSnapshotMeta(snapshotDir)).toBeNull();
  }
  fs.writeFileSync(join(snapshotDir, snapshotMetaFile), JSON.stringify(meta).replace(`"index":1200`, `"index":1e400`));
  expect(readSnapshotMeta(snapshotDir)).toBeNull();
  // What older files may lack stays readable.
  const { createdAt: _c, clusterId: _i, stateSizeBytes: _s, ...older } = meta;
  fs.writeFileSync(join(snapshotDir, snapshotMetaFile), JSON.stringify({ ...older, membership: { voters: ["node1"] } }));
  expect(readSnapshotMeta(snapshotDir) as unknown).toEqual({ ...older, membership: { voters: ["node1"], learners: [] } });
  // Not UTF-8: read lossily, the cluster id would have held U+FFFD.
  const bytes = te.encode(JSON.stringify({ ...meta, clusterId: "c-?" }));
  bytes[bytes.indexOf(0x3f)] = 0xff;
  fs.writeFileSync(join(snapshotDir, snapshotMetaFile), bytes);
  expect(readSnapshotMeta(snapshotDir)).toBeNull();
});

test("a chunk or acknowledgement with a field of the wrong kind is malformed", () => {
  // Found by seeds 12 (no membership), 95 (no createdAt), 109 (no sender), 3 ("d\ufffdne"), 21 (term 2^64).
  const data = te.encode("0123456789");
  const chunks: unknown[] = [
    { ...header, meta: { ...header.meta, membership: undefined } },
    { ...header, meta: { ...header.meta, term: "../../../../tmp/elsewhere" } },
    { ...header, createdAt: undefined },
    { ...header, from: 1 },
    { ...header, offset: header.totalBytes - 5 },
    { ...header, crc32: -1 },
    { ...header, totalBytes: 2 ** 64 },
  ];
  for (const h of chunks) expect(decodeChunk(encodeChunk(h as ChunkHeader, data))).toBeNull();
  const badAcks: unknown[] = [
    { term: 4, index: 1200, receivedBytes: 10, status: "d\ufffdne" },
    { term: 2 ** 64, index: 1200, receivedBytes: 10, status: "done" },
    { index: 1200, receivedBytes: 10, status: "done" },
    { term: 4, index: 1200, receivedBytes: -1, status: "progress" },
    { term: 4, index: 1200, receivedBytes: 0, status: "failed", reason: 5 },
  ];
  for (const a of badAcks) expect(decodeAck(te.encode(JSON.stringify(a)))).toBeNull();
});
