// Where a worker's module is. From source it sits beside the module that starts it; in the
// compiled binary it is an extra entry point (build/build.ts), addressed relative to the
// bundle's root, src/.

/** `fromSrc`: the worker's path under src/, e.g. "store/snapshot-worker.ts". */
export function workerSpecifier(callerUrl: string, fromSrc: string): string {
  if (callerUrl.includes("$bunfs")) return `./${fromSrc}`;
  return new URL(`./${fromSrc.slice(fromSrc.lastIndexOf("/") + 1)}`, callerUrl).href;
}
