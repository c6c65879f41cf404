// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3",
// SC'11): a counter-based generator. The output for (key, counter) depends on
// nothing else, so a value is reproducible without replaying what came before.

const M0 = 0xd2511f53;
const M1 = 0xcd9e8d57;
const W0 = 0x9e3779b9;
const W1 = 0xbb67ae85;

/** High and low 32 bits of the 64-bit product of two u32, exactly, in doubles. */
function mulHiLo(a: number, b: number, out: Uint32Array, hiAt: number, loAt: number): void {
  const aHigh = a >>> 16;
  const aLow = a & 0xffff;
  const upper = aHigh * b; // < 2^48, exact
  const lower = aLow * b; // < 2^48, exact
  const mid = (upper % 65536) * 65536 + lower; // < 2^49, exact
  out[hiAt] = Math.floor(upper / 65536) + Math.floor(mid / 4294967296);
  out[loAt] = mid % 4294967296;
}

const tmp = new Uint32Array(4);

/** Four u32 words for counter (c0..c3) under key (k0, k1), written to `out`. */
export function philox4x32(c0: number, c1: number, c2: number, c3: number, k0: number, k1: number, out: Uint32Array): Uint32Array {
  let x0 = c0 >>> 0, x1 = c1 >>> 0, x2 = c2 >>> 0, x3 = c3 >>> 0;
  let key0 = k0 >>> 0, key1 = k1 >>> 0;
  for (let round = 0; round < 10; round++) {
    mulHiLo(M0, x0, tmp, 0, 1);
    mulHiLo(M1, x2, tmp, 2, 3);
    const n0 = (tmp[2] ^ x1 ^ key0) >>> 0;
    const n2 = (tmp[0] ^ x3 ^ key1) >>> 0;
    x0 = n0;
    x1 = tmp[3];
    x2 = n2;
    x3 = tmp[1];
    key0 = (key0 + W0) >>> 0;
    key1 = (key1 + W1) >>> 0;
  }
  out[0] = x0;
  out[1] = x1;
  out[2] = x2;
  out[3] = x3;
  return out;
}

/** A u32 -> uniform in (0, 1), never 0 (safe for log). */
export const toUnitOpen = (w: number) => (w + 0.5) / 4294967296;

/**
 * Fills `out` with N(0, std^2) samples for stream `stream` of `seed`: element i
 * (counting from `firstElement`) comes from counter (floor(i/4), stream), so any
 * slice can be generated alone.
 */
export function fillNormal(out: Float32Array | Float64Array, seed: number, stream: number, std: number, firstElement = 0): void {
  if (firstElement % 4 !== 0) throw new RangeError(`firstElement must be a multiple of 4, got ${firstElement}`);
  const words = new Uint32Array(4);
  for (let i = 0; i < out.length; i += 4) {
    philox4x32((firstElement + i) / 4, 0, stream, 0, seed, 0x6b696c6e, words); // key word 2: "kiln"
    // Box-Muller on two pairs of uniforms gives four normals.
    for (let pair = 0; pair < 2; pair++) {
      const u1 = toUnitOpen(words[2 * pair]);
      const u2 = toUnitOpen(words[2 * pair + 1]);
      const r = Math.sqrt(-2 * Math.log(u1)) * std;
      const theta = 2 * Math.PI * u2;
      if (i + 2 * pair < out.length) out[i + 2 * pair] = r * Math.cos(theta);
      if (i + 2 * pair + 1 < out.length) out[i + 2 * pair + 1] = r * Math.sin(theta);
    }
  }
}

/** A stable 32-bit stream id for a name (FNV-1a), so each parameter has its own stream. */
export function streamOf(name: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < name.length; i++) {
    h ^= name.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** Fills `out` with uniforms in (0, 1) for stream `stream` of `seed`, element i from counter (floor(i/4), stream) as fillNormal. */
export function fillUniform(out: Float32Array | Float64Array, seed: number, stream: number, firstElement = 0): void {
  if (firstElement % 4 !== 0) throw new RangeError(`firstElement must be a multiple of 4, got ${firstElement}`);
  const words = new Uint32Array(4);
  for (let i = 0; i < out.length; i += 4) {
    philox4x32((firstElement + i) / 4, 0, stream, 0, seed, 0x6b696c6e, words);
    for (let j = 0; j < 4 && i + j < out.length; j++) out[i + j] = toUnitOpen(words[j]);
  }
}
