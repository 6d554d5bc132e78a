// Putting one archived WAL segment where archive_command sends it (`svc admin wal-archive-put
// %p DEST`): a local directory or file path, or an object store (`s3://bucket/prefix/%f`). A
// local copy is written beside its name, synced and renamed, so a crash never leaves a part
// under the final name. An existing segment of the same name is success when its bytes are
// the same (another leader archived the same committed range) and a failure otherwise (two
// histories in one location): never overwritten.

import * as fs from "node:fs";
import { basename, dirname, join } from "node:path";
import { fsyncDir } from "../storage/index.ts";
import { SvcError, errorMessage } from "../util/errors.ts";
import { ObjectStore, isObjectUrl } from "./s3.ts";

export type PutOutcome = { stored: "written" | "already_there"; destination: string };

export async function putArchivedSegment(path: string, destination: string, env: Readonly<Record<string, string | undefined>> = process.env): Promise<PutOutcome> {
  let bytes: Uint8Array;
  try {
    bytes = new Uint8Array(await fs.promises.readFile(path));
  } catch (e) {
    throw new SvcError("ARCHIVE_UNREADABLE", `cannot read the segment to archive ${path}: ${errorMessage(e)}`);
  }
  const name = basename(path);
  if (isObjectUrl(destination)) {
    const url = destination.endsWith("/") || !destination.endsWith(".wal") ? `${destination.replace(/\/+$/, "")}/${name}` : destination;
    const store = ObjectStore.at(url, env);
    if (await store.exists("")) return { stored: sameOrRefuse(await store.get(""), bytes, url), destination: url };
    await store.put("", bytes);
    return { stored: "written", destination: url };
  }
  const target = fs.statSync(destination, { throwIfNoEntry: false })?.isDirectory() === true ? join(destination, name) : destination;
  if (fs.existsSync(target)) return { stored: sameOrRefuse(new Uint8Array(fs.readFileSync(target)), bytes, target), destination: target };
  const part = `${target}.part-${process.pid}`;
  try {
    const fd = fs.openSync(part, "w", 0o640);
    try {
      fs.writeSync(fd, bytes);
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(part, target);
    fsyncDir(dirname(target));
  } catch (e) {
    fs.rmSync(part, { force: true });
    throw new SvcError("BACKUP_FAILED", `cannot write ${target}: ${errorMessage(e)}`, { hint: "check the archive directory exists and svc may write to it" });
  }
  return { stored: "written", destination: target };
}

function sameOrRefuse(existing: Uint8Array, bytes: Uint8Array, where: string): "already_there" {
  if (existing.length === bytes.length && existing.every((b, i) => b === bytes[i])) return "already_there";
  throw new SvcError("ARCHIVE_CONFLICT", `${where} exists with other contents: the location holds another history (another cluster, or this one before a point-in-time restore)`, {
    hint: "give each cluster, and each cluster after a point-in-time restore, an archive location of its own",
  });
}
