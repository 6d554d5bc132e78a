// Filing a snapshot of a term and index already held (an install of an image the node has, an
// image made with nothing applied since): the one held stays when it is whole, and is replaced
// when it is damaged — a damaged copy kept under the name would be trusted by every later use.

import { afterEach, expect, test } from "bun:test";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SnapshotStore, snapshotStateFile, verifySnapshot } from "../../src/storage/index.ts";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

const membership = { voters: ["n1"], learners: [] };

async function file(store: SnapshotStore, contents: string): Promise<ReturnType<SnapshotStore["commit"]>> {
  const temp = store.beginTemp();
  fs.writeFileSync(join(temp, snapshotStateFile), contents);
  const sha = new Bun.CryptoHasher("sha256").update(contents).digest("hex");
  return store.commit(temp, { clusterId: "c1", index: 40, term: 2, membership, stateSha256: sha });
}

function storeDir(): SnapshotStore {
  const dir = fs.mkdtempSync(join(tmpdir(), "svc-snapshots-"));
  dirs.push(dir);
  return new SnapshotStore(dir);
}

test("the same snapshot again keeps the whole one held", async () => {
  const store = storeDir();
  const first = await file(store, "image at 40");
  const again = await file(store, "image at 40");
  expect(again.dir).toBe(first.dir);
  expect(again.replacedDamaged).toBeUndefined();
  expect(fs.readdirSync(store.dir)).toEqual([first.name]);
});

test("a damaged snapshot held under the same name is replaced by the new one", async () => {
  const store = storeDir();
  const first = await file(store, "image at 40");
  fs.writeFileSync(join(first.dir, snapshotStateFile), "image at 41");
  expect((await verifySnapshot(first)).ok).toBe(false);
  const again = await file(store, "image at 40");
  expect(again.replacedDamaged).toContain("checksum mismatch");
  expect(fs.readFileSync(join(again.dir, snapshotStateFile), "utf8")).toBe("image at 40");
  expect((await verifySnapshot(again)).ok).toBe(true);
  expect(fs.readdirSync(store.dir)).toEqual([first.name]);
});

test("a held snapshot with no readable meta.json is replaced too", async () => {
  const store = storeDir();
  const first = await file(store, "image at 40");
  fs.rmSync(join(first.dir, "meta.json"));
  const again = await file(store, "image at 40");
  expect(again.replacedDamaged).toContain("meta.json");
  expect((await verifySnapshot(again)).ok).toBe(true);
});

test("meta.json carries its own checksum: a flipped bit in a member's id, or an edit that stays valid JSON, makes the image damaged, never used", async () => {
  // Its membership goes to the Raft core as it is: one bit turned "n1" into "n3", and a follower
  // rebuilt from the image became a lone voter that elected itself and acknowledged writes.
  const store = storeDir();
  const first = await file(store, "image at 40");
  const metaPath = join(first.dir, "meta.json");
  const whole = fs.readFileSync(metaPath);
  expect(JSON.parse(whole.toString()).metaCrc32).toMatch(/^[0-9a-f]{8}$/);
  const flipped = Buffer.from(whole);
  const at = flipped.indexOf(Buffer.from('"n1"'));
  flipped[at + 2] = (flipped[at + 2] ?? 0) ^ 0x02;
  const edited = JSON.stringify({ ...JSON.parse(whole.toString()), membership: { voters: ["n9"], learners: [] } }, null, 2);
  for (const [what, bytes] of [["a flipped bit", flipped], ["an edit", Buffer.from(edited)]] as const) {
    fs.writeFileSync(metaPath, bytes);
    const listed = store.list()[0]!;
    expect({ what, meta: listed.meta }).toEqual({ what, meta: null });
    expect(store.latest()).toBeNull();
    expect({ what, check: await verifySnapshot(listed) }).toEqual({ what, check: { ok: false, reason: "meta.json does not match its own checksum (metaCrc32): damaged or edited" } });
  }
  // A flipped bit in the checksum's own key: the file must not pass for one from before it.
  fs.writeFileSync(metaPath, whole.toString().replace('"metaCrc32"', '"metaCrc33"'));
  expect(store.list()[0]!.meta).toBeNull();
  // One that names a node twice is not svc's either, checksum or not (an older file has none).
  const old = JSON.parse(whole.toString()) as Record<string, unknown>;
  delete old["metaCrc32"];
  fs.writeFileSync(metaPath, JSON.stringify({ ...old, membership: { voters: ["n1", "n1"], learners: [] } }));
  expect(store.list()[0]!.meta).toBeNull();
  // An older file without the checksum reads as before.
  fs.writeFileSync(metaPath, JSON.stringify(old));
  expect(store.list()[0]!.meta?.membership).toEqual(membership);
  expect((await verifySnapshot(store.list()[0]!)).ok).toBe(true);
});
