// Safe retries in the store (src/store/request-ids.ts): an execute entry carrying a request id
// the store remembers applies nothing and answers the first one's result; ids are forgotten by
// the entries' timestamps and order, identically on every replica, and go with snapshots.

import { afterEach, describe, expect, test } from "bun:test";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Store, checkWriteStatement, decodeCommand, encodeCommand, requestIdLengthMax, requestWindowMs, requestsRememberedMax, type ApplyResult, type Command } from "../../src/store/index.ts";
import type { Entry } from "../../src/util/log-data.ts";
import { parseExecuteBody, parseRequestId } from "../../src/http/body.ts";

const stores: Store[] = [];
const dirs: string[] = [];
afterEach(() => {
  for (const s of stores.splice(0)) s.close();
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

function memoryStore(image: Uint8Array | null = null): Store {
  const s = Store.openInMemory(image);
  stores.push(s);
  return s;
}

const t0 = 1_700_000_000_000;

function entry(index: number, timestampMs: number, sql: string, params: (string | number)[], requestId?: string): Entry {
  const command: Command = { op: "execute", statements: [{ sql, params }], ...(requestId === undefined ? {} : { requestId }) };
  return { term: 1, index, kind: "normal", timestampMs, data: encodeCommand(command) };
}

/** A store with table t applied at index 1. */
function storeWithTable(store = memoryStore()): Store {
  store.apply([entry(1, t0, "CREATE TABLE t (n INTEGER, s TEXT)", [])]);
  return store;
}

function rows(store: Store): unknown[][] {
  return store.query("SELECT n, s FROM t ORDER BY rowid", []).rows;
}

function insert(index: number, timestampMs: number, n: number, requestId?: string): Entry {
  return entry(index, timestampMs, "INSERT INTO t (n, s) VALUES (?, ?)", [n, `row ${n}`], requestId);
}

describe("request ids", () => {
  test("the answer remembered for a request id is the same on a node that restarted before it: an UPDATE's last_insert_id does not come from the connection", () => {
    // One node applied an insert and then the update; another restarted between the two
    // (its connection never saw the insert). Both keep, and a retry on either answers, the same.
    const ran = storeWithTable();
    ran.apply([insert(2, t0 + 1000, 1)]);
    const restarted = memoryStore(ran.serialize());
    const update = entry(3, t0 + 2000, "UPDATE t SET s = 'changed' WHERE n = ?", [1], "req-u");
    const [answered] = ran.apply([update]);
    restarted.apply([update]);
    expect(answered).toEqual({ kind: "execute", ok: true, results: [{ rowsAffected: 1, lastInsertId: 0 }] });
    expect(restarted.rememberedRequest("req-u", t0 + 3000)).toEqual(ran.rememberedRequest("req-u", t0 + 3000));
  });

  test("a retried request id applies nothing and answers the first entry's result and index", () => {
    const store = storeWithTable();
    const [first] = store.apply([insert(2, t0 + 1000, 1, "req-a")]);
    const [retry] = store.apply([insert(3, t0 + 2000, 1, "req-a")]);
    expect(first).toEqual({ kind: "execute", ok: true, results: [{ rowsAffected: 1, lastInsertId: 1 }] });
    expect(retry).toEqual({ kind: "execute", ok: true, results: [{ rowsAffected: 1, lastInsertId: 1 }], firstIndex: 2 });
    expect(rows(store)).toEqual([[1, "row 1"]]);
    expect(store.appliedIndex).toBe(3);
  });

  test("a request id proposed twice before either applied applies once, in the same apply or not", () => {
    const store = storeWithTable();
    const results = store.apply([insert(2, t0, 1, "twice"), insert(3, t0, 1, "twice"), insert(4, t0, 2, "other")]);
    expect(results.map((r) => (r as { firstIndex?: number }).firstIndex)).toEqual([undefined, 2, undefined]);
    expect(rows(store)).toEqual([[1, "row 1"], [2, "row 2"]]);
  });

  test("a write without a request id is applied every time", () => {
    const store = storeWithTable();
    store.apply([insert(2, t0, 1), insert(3, t0, 1)]);
    expect(rows(store)).toEqual([[1, "row 1"], [1, "row 1"]]);
  });

  test("a retried request whose write failed answers the same failure and applies nothing", () => {
    const store = storeWithTable();
    const [first] = store.apply([entry(2, t0, "INSERT INTO missing VALUES (1)", [], "bad")]);
    store.apply([entry(3, t0, "CREATE TABLE missing (x)", [])]);
    const [retry] = store.apply([entry(4, t0, "INSERT INTO missing VALUES (1)", [], "bad")]);
    expect(first).toMatchObject({ kind: "execute", ok: false, statementIndex: 0 });
    expect(retry).toEqual({ ...(first as ApplyResult & object), firstIndex: 2 } as ApplyResult);
    expect(store.query("SELECT count(*) FROM missing", []).rows).toEqual([[0]]);
  });

  test("an id is remembered for the window measured with the entries' timestamps, then a retry applies again", () => {
    const store = storeWithTable();
    store.apply([insert(2, t0, 1, "old")]);
    // Within the window by the entries' clock: still a retry.
    store.apply([insert(3, t0 + requestWindowMs, 1, "old")]);
    expect(rows(store)).toEqual([[1, "row 1"]]);
    // The next entry with an id, past the window of "old": "old" is forgotten, and a retry is a new write.
    store.apply([insert(4, t0 + requestWindowMs + 1, 2, "new")]);
    const [again] = store.apply([insert(5, t0 + requestWindowMs + 2, 1, "old")]);
    expect(again).toEqual({ kind: "execute", ok: true, results: [{ rowsAffected: 1, lastInsertId: 3 }] });
    expect(rows(store)).toEqual([[1, "row 1"], [2, "row 2"], [1, "row 1"]]);
  });

  test("an id used again for other statements applies nothing and says so; a retry of the first statements still gets their answer", () => {
    const store = storeWithTable();
    store.apply([insert(2, t0, 1, "x")]);
    const [reused] = store.apply([entry(3, t0 + 1, "DELETE FROM t", [], "x")]);
    expect(reused).toMatchObject({ kind: "execute", ok: false, requestIdReused: true, firstIndex: 2 });
    expect(reused?.kind === "execute" && !reused.ok ? reused.message : "").toContain("was used by another write (log entry 2) with other statements");
    expect(rows(store)).toEqual([[1, "row 1"]]);
    const [retry] = store.apply([insert(4, t0 + 2, 1, "x")]);
    expect(retry).toEqual({ kind: "execute", ok: true, results: [{ rowsAffected: 1, lastInsertId: 1 }], firstIndex: 2 });
    // The same statements with another parameter are other statements.
    expect(store.apply([insert(5, t0 + 3, 7, "x")])[0]).toMatchObject({ ok: false, requestIdReused: true });
    expect(rows(store)).toEqual([[1, "row 1"]]);
  });

  test("the leader answers a remembered id from the store only within the window of its own clock", () => {
    const store = storeWithTable();
    store.apply([insert(2, t0, 1, "x")]);
    expect(store.rememberedRequest("x", t0 + 5)).toEqual({ ok: true, results: [{ rowsAffected: 1, lastInsertId: 1 }], firstIndex: 2, bodyHash: expect.any(String) });
    expect(store.rememberedRequest("x", t0 + requestWindowMs + 1)).toBeNull();
    expect(store.rememberedRequest("y", t0)).toBeNull();
    expect(memoryStore().rememberedRequest("x", t0)).toBeNull();
  });

  test(`past ${requestsRememberedMax} ids the oldest is forgotten first, identically on two replicas`, () => {
    const a = storeWithTable();
    const b = storeWithTable();
    const entries: Entry[] = [];
    const total = requestsRememberedMax + 10;
    for (let i = 0; i < total; i++) entries.push(insert(2 + i, t0 + i, i, `id-${i}`));
    a.apply(entries);
    for (let i = 0; i < entries.length; i += 7919) b.apply(entries.slice(i, i + 7919));
    expect(a.rememberedRequestCount()).toBeLessThanOrEqual(requestsRememberedMax);
    expect(a.rememberedRequestCount()).toBe(b.rememberedRequestCount());
    const forgotten = total - a.rememberedRequestCount();
    // The oldest ids are the ones forgotten: a retry of the first applies again, of the newest does not.
    const next = 2 + total;
    const [oldest, newest] = a.apply([insert(next, t0 + total, 0, "id-0"), insert(next + 1, t0 + total, total - 1, `id-${total - 1}`)]);
    expect((oldest as { firstIndex?: number }).firstIndex).toBeUndefined();
    expect((newest as { firstIndex?: number }).firstIndex).toBe(2 + total - 1);
    expect(a.rememberedRequest(`id-${forgotten - 1}`, t0)).toBeNull();
    expect(a.rememberedRequest(`id-${forgotten + 1}`, t0)?.firstIndex).toBe(2 + forgotten + 1);
  }, 120_000);

  test("remembered ids survive a reopen and go with a snapshot image", () => {
    const dir = fs.mkdtempSync(join(tmpdir(), "svc-request-ids-"));
    dirs.push(dir);
    const path = join(dir, "state.db");
    const onDisk = Store.open(path);
    storeWithTable(onDisk);
    onDisk.apply([insert(2, t0, 1, "kept")]);
    onDisk.close();
    const reopened = Store.open(path);
    stores.push(reopened);
    const [retry] = reopened.apply([insert(3, t0 + 1, 1, "kept")]);
    expect((retry as { firstIndex?: number }).firstIndex).toBe(2);

    const image = memoryStore();
    storeWithTable(image);
    image.apply([insert(2, t0, 1, "in-image")]);
    const restored = memoryStore(image.serialize());
    restored.apply([insert(3, t0 + 1, 1, "in-image")]);
    expect(rows(restored)).toEqual([[1, "row 1"]]);
  });

  test("svc's table of request ids is not the user's: it is neither listed nor writable", () => {
    const store = storeWithTable();
    store.apply([insert(2, t0, 1, "x")]);
    expect(store.stats().tables.map((t) => t.name)).toEqual(["t"]);
    expect(() => checkWriteStatement("DELETE FROM _svc_requests")).toThrow(/reserved/);
  });

  test("a request id is a string of 1 to 128 characters, in the body and in the log", () => {
    const ok = { statements: ["DELETE FROM t"], request_id: "r-1" };
    expect(parseExecuteBody(ok)).toHaveLength(1);
    expect(parseRequestId(ok)).toBe("r-1");
    expect(parseRequestId({ statements: [] })).toBeUndefined();
    for (const bad of ["", "x".repeat(requestIdLengthMax + 1), 12, null]) {
      expect(() => parseRequestId({ statements: ["DELETE FROM t"], request_id: bad })).toThrow(/request_id/);
    }
    const long = new TextEncoder().encode(JSON.stringify({ op: "execute", statements: [], requestId: "x".repeat(requestIdLengthMax + 1) }));
    expect(decodeCommand(long)).toBeNull();
  });
});
