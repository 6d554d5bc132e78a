// The process's contact with the machine, below storage, store and node: durable file
// primitives (real fsyncs; Bun.write never syncs), file hashing off the main thread, gradual
// write-back of large files, and sd_notify for systemd.

export { writeFileAtomic, fsyncDir, fsyncPath, fsyncPathAsync, ensureDir, writeFully } from "./durable-file.ts";
export { sha256File, sha256FileSync } from "./file-hash.ts";
export { fsyncGradually } from "./writeback.ts";
export { sdNotify } from "./sdnotify.ts";
