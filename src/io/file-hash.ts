// SHA-256 of a file, read 1 MiB at a time so that a large image never sits in memory whole.

import * as fs from "node:fs";

const hashChunkBytes = 1024 * 1024;

/**
 * On the I/O pool: the thread that serves writes hashes in slices of about a millisecond
 * rather than in one block that would stall it.
 */
export async function sha256File(path: string): Promise<string> {
  const hasher = new Bun.CryptoHasher("sha256");
  const handle = await fs.promises.open(path, "r");
  try {
    const buf = new Uint8Array(hashChunkBytes);
    for (let position = 0; ; ) {
      const { bytesRead } = await handle.read(buf, 0, buf.length, position);
      if (bytesRead === 0) break;
      hasher.update(buf.subarray(0, bytesRead));
      position += bytesRead;
    }
  } finally {
    await handle.close();
  }
  return hasher.digest("hex");
}

/** The same, blocking: for threads with nothing else to do (the snapshot worker). */
export function sha256FileSync(path: string): string {
  const hasher = new Bun.CryptoHasher("sha256");
  const fd = fs.openSync(path, "r");
  try {
    const buf = new Uint8Array(hashChunkBytes);
    for (let position = 0; ; ) {
      const bytesRead = fs.readSync(fd, buf, 0, buf.length, position);
      if (bytesRead === 0) break;
      hasher.update(buf.subarray(0, bytesRead));
      position += bytesRead;
    }
  } finally {
    fs.closeSync(fd);
  }
  return hasher.digest("hex");
}
