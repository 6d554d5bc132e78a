// Key paths as svc prints them: dotted keys, [i] for array elements, quoted when a key is not bare.

export type PathSegment = string | number;

const BARE_KEY = /^[A-Za-z0-9_-]+$/;

export function formatKeyPath(segments: readonly PathSegment[]): string {
  let out = "";
  for (const segment of segments) {
    if (typeof segment === "number") out += `[${segment}]`;
    else {
      const key = BARE_KEY.test(segment) ? segment : JSON.stringify(segment);
      out += out === "" ? key : `.${key}`;
    }
  }
  return out;
}
