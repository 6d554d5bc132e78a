// Where a file's data ends, as its file system knows it (lseek with SEEK_DATA and SEEK_HOLE):
// past that point it holds only holes or space reserved without being written (fallocate),
// both of which read as zeros. A WAL segment is mostly such space, and finding its records'
// end by reading it cost a restart up to a few hundred milliseconds per segment.

import { dlopen, FFIType } from "bun:ffi";

const SEEK_DATA = 3;
const SEEK_HOLE = 4;

type Lseek = (fd: number, offset: number, whence: number) => number;
// undefined: not loaded yet; null: not available here.
let lseekFn: Lseek | null | undefined;

function loadLseek(): Lseek | null {
  if (process.platform !== "linux") return null;
  try {
    const lib = dlopen("libc.so.6", { lseek: { args: [FFIType.i32, FFIType.i64, FFIType.i32], returns: FFIType.i64_fast } });
    return (fd, offset, whence) => Number(lib.symbols.lseek(fd, offset, whence));
  } catch {
    return null;
  }
}

/**
 * One past the end of the last stretch of `fd` (of `sizeBytes`) that may hold data: everything
 * after it reads as zeros. `sizeBytes` when the file system cannot say (or there is no lseek
 * to ask), so a caller reads what it would have read anyway. Moves the file offset (callers
 * read and write at explicit positions).
 */
export function dataEndOfFile(fd: number, sizeBytes: number): number {
  if (lseekFn === undefined) lseekFn = loadLseek();
  const lseek = lseekFn;
  if (lseek === null || sizeBytes <= 0) return sizeBytes;
  let end = 0;
  let at = 0;
  // A file has few extents; the bound only guards against a file system that loops.
  for (let i = 0; i < 4096 && at < sizeBytes; i++) {
    const data = lseek(fd, at, SEEK_DATA);
    if (data < 0) {
      // No data at or after `at` (ENXIO). At the very start it might also be a refusal: a file
      // system that answers SEEK_DATA answers SEEK_HOLE at 0 with 0 for a file that is all hole.
      if (at === 0) return lseek(fd, 0, SEEK_HOLE) === 0 ? 0 : sizeBytes;
      return end;
    }
    const hole = lseek(fd, data, SEEK_HOLE);
    if (hole <= data) return sizeBytes;
    end = Math.min(hole, sizeBytes);
    at = hole;
  }
  return at >= sizeBytes ? end : sizeBytes;
}
