// A small seeded PRNG (xoshiro128**, seeded through splitmix32). Deterministic across
// platforms: the Raft core and the simulator take their randomness from here, and the
// store seeds one per entry so that random() is the same on every node.

export interface Prng {
  /** A float in [0, 1). */
  next(): number;
  /** An integer in [0, bound). */
  nextInt(bound: number): number;
  /** A 32-bit unsigned integer. */
  nextU32(): number;
}

function splitmix32(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x9e3779b9) >>> 0;
    let z = s;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
    return (z ^ (z >>> 16)) >>> 0;
  };
}

export function createPrng(seedLow: number, seedHigh = 0): Prng {
  const mix = splitmix32((seedLow ^ Math.imul(seedHigh >>> 0, 0x632be5ab)) >>> 0);
  let a = mix(), b = mix(), c = mix(), d = mix();
  if ((a | b | c | d) === 0) a = 1;
  const nextU32 = (): number => {
    const result = Math.imul(rotl(Math.imul(b, 5) >>> 0, 7), 9) >>> 0;
    const t = (b << 9) >>> 0;
    c ^= a; d ^= b; b ^= c; a ^= d;
    c ^= t;
    d = rotl(d, 11);
    return result;
  };
  return {
    nextU32,
    next: () => nextU32() / 0x1_0000_0000,
    nextInt: (bound) => Math.floor((nextU32() / 0x1_0000_0000) * bound),
  };
}

function rotl(x: number, k: number): number {
  return ((x << k) | (x >>> (32 - k))) >>> 0;
}
