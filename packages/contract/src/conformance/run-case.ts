import type { Backend, BufferHandle } from "../backend.js";
import { bytesPerElement, isFloatDType } from "../dtype.js";
import { decodeElements, encodeToBytes } from "../host-codec.js";
import { type KernelName, kernelSpecs } from "../kernels/index.js";
import type { OperandInit, OperandSpec } from "../kernels/spec.js";
import { type ConformanceCase, caseName } from "./case.js";
import { hashString, seededRandom } from "./rng.js";
import { TOLERANCES, compareValues, looser } from "./tolerance.js";

/** Bytes of sentinel before and after every buffer; a backend must leave them alone. */
const GUARD = 64;
const SENTINEL = 0xa5;

/** The operands a case uses: required ones plus the optional ones it names. */
export function caseOperands(c: ConformanceCase): OperandSpec[] {
  const spec = kernelSpecs[c.kernel] as { operands(a: unknown): OperandSpec[] };
  return spec.operands(c.args).filter((s) => !s.optional || (c.present ?? []).includes(s.key));
}

/**
 * One buffer of a case: a single operand, or several operands sharing one buffer
 * at element offsets (a packed qkv buffer and its packed gradient).
 */
interface Placement {
  name: string;
  members: { spec: OperandSpec; offset: number }[];
  dtype: OperandSpec["dtype"];
  elements: number;
}

function placements(c: ConformanceCase): Placement[] {
  const specs = caseOperands(c);
  const out: Placement[] = [];
  const grouped = new Set<string>();
  for (const group of c.shared ?? []) {
    const members = Object.entries(group).map(([key, offset]) => ({ spec: specs.find((s) => s.key === key)!, offset }));
    for (const m of members) grouped.add(m.spec.key);
    out.push({
      name: members.map((m) => m.spec.key).join("+"),
      members,
      dtype: members[0].spec.dtype,
      elements: Math.max(...members.map((m) => m.offset + m.spec.elements)),
    });
  }
  for (const s of specs) {
    if (grouped.has(s.key) || s.key === c.inPlace?.[0]) continue;
    out.push({ name: s.key, members: [{ spec: s, offset: 0 }], dtype: s.dtype, elements: s.elements });
  }
  return out;
}

/** Fills `v` as `init` says, drawing from `rand`. */
function fillInit(v: Float64Array, init: OperandInit, rand: () => number): void {
  const n = v.length;
  switch (init.kind) {
    case "uniform":
      for (let i = 0; i < n; i++) v[i] = init.lo + (init.hi - init.lo) * rand();
      return;
    case "index":
      for (let i = 0; i < n; i++) v[i] = Math.floor(rand() * init.max);
      return;
    case "target":
      for (let i = 0; i < n; i++) v[i] = rand() < 0.1 ? -1 : Math.floor(rand() * init.max);
      return;
    case "permutation":
      for (let i = 0; i < n; i++) v[i] = i;
      for (let i = n - 1; i > 0; i--) {
        const j = Math.floor(rand() * (i + 1));
        [v[i], v[j]] = [v[j], v[i]];
      }
      return;
    case "documentStarts": {
      // Documents of 1 to about seqLen / 2 tokens (a few of one token), and now and then a row left whole.
      for (let row = 0; row * init.seqLen < n; row++) {
        const whole = rand() < 0.15;
        let start = 0;
        for (let t = 0; t < init.seqLen; t++) {
          if (t > 0 && !whole && rand() < Math.max(0.08, 3 / init.seqLen)) start = t;
          v[row * init.seqLen + t] = start;
        }
      }
      return;
    }
    case "offsets": {
      // Sorted cut points; about one in four repeats the one before (an empty group).
      const cuts = Array.from({ length: n - 2 }, () => Math.floor(rand() * (init.total + 1))).sort((x, y) => x - y);
      for (let i = 1; i < cuts.length; i++) if (rand() < 0.25) cuts[i] = cuts[i - 1];
      v.set([0, ...cuts, init.total]);
      return;
    }
  }
}

/** Test data for every buffer (outputs too, so untouched or accumulated elements show), rounded to its dtype. */
export function caseInputs(c: ConformanceCase): Record<string, Uint8Array> {
  const rand = seededRandom(hashString(caseName(c)));
  const places = placements(c);
  const whole: Record<string, Float64Array> = {};
  const values: Record<string, Float64Array> = {};
  for (const p of places) {
    const v = new Float64Array(p.elements);
    fillInit(v, p.members[0].spec.init ?? { kind: "uniform", lo: -1, hi: 1 }, rand);
    whole[p.name] = decodeElements(encodeToBytes(v, p.dtype), p.dtype, p.elements);
    for (const m of p.members) values[m.spec.key] = whole[p.name].subarray(m.offset);
  }
  c.derive?.(c.args, values);
  return Object.fromEntries(places.map((p) => [p.name, encodeToBytes(whole[p.name], p.dtype)]));
}

interface Placed {
  place: Placement;
  buffer: BufferHandle;
  bytes: Uint8Array;
}

/** Uploads each buffer inside guard bytes, calls the kernel, and downloads every buffer whole. */
export async function executeCase(backend: Backend, c: ConformanceCase, inputs: Record<string, Uint8Array>) {
  const placed: Placed[] = [];
  const args: Record<string, unknown> = { ...c.args };
  try {
    for (const place of placements(c)) {
      const bytes = inputs[place.name];
      const buffer = backend.alloc(GUARD + bytes.byteLength + GUARD);
      placed.push({ place, buffer, bytes });
      const image = new Uint8Array(buffer.byteLength).fill(SENTINEL);
      image.set(bytes, GUARD);
      backend.upload(buffer, image);
      for (const m of place.members) args[m.spec.key] = { buffer, byteOffset: GUARD + m.offset * bytesPerElement(place.dtype) };
    }
    if (c.inPlace) args[c.inPlace[0]] = args[c.inPlace[1]];
    (backend.kernels[c.kernel] as (a: unknown) => void)(args);
    await backend.synchronize();
    const images: Record<string, Uint8Array> = {};
    for (const p of placed) {
      const image = new Uint8Array(p.buffer.byteLength);
      await backend.download(p.buffer, image);
      images[p.place.name] = image;
    }
    return { placed, images };
  } finally {
    for (const p of placed) backend.free(p.buffer);
  }
}

/**
 * Runs one case on `backend` and on `reference` with identical inputs and returns
 * every problem found (empty when the case passes): wrong outputs, changed inputs,
 * bytes written outside an operand.
 */
export async function checkCase(backend: Backend, reference: Backend, c: ConformanceCase): Promise<string[]> {
  const inputs = caseInputs(c);
  const got = await executeCase(backend, c, inputs);
  const want = await executeCase(reference, c, inputs);
  const problems: string[] = [];
  const specs = caseOperands(c);
  for (const { place, bytes } of got.placed) {
    const image = got.images[place.name];
    const n = bytes.byteLength;
    for (const [lo, hi] of [[0, GUARD], [GUARD + n, GUARD + n + GUARD]]) {
      const bad = image.subarray(lo, hi).findIndex((b) => b !== SENTINEL);
      if (bad >= 0) problems.push(`${place.name}: byte ${lo + bad - GUARD} outside the operand was written`);
    }
    const writer = c.inPlace && place.name === c.inPlace[1] ? specs.find((s) => s.key === c.inPlace![0]) : undefined;
    const outputs = place.members.filter((m) => m.spec.role !== "in").map((m) => m.spec);
    const written = writer ?? outputs[0];
    const actual = image.subarray(GUARD, GUARD + n);
    if (!written) {
      let changed = 0;
      while (changed < n && actual[changed] === bytes[changed]) changed++;
      if (changed < n) problems.push(`${place.name}: input was modified (byte ${changed})`);
      continue;
    }
    const a = decodeElements(actual, place.dtype, place.elements);
    const e = decodeElements(want.images[place.name].subarray(GUARD, GUARD + n), place.dtype, place.elements);
    const tol = isFloatDType(place.dtype) ? looser(TOLERANCES[place.dtype], TOLERANCES[c.dtype]) : TOLERANCES[place.dtype];
    const { mismatches, count } = compareValues(a, e, tol);
    if (count > 0) {
      const shown = mismatches.map((m) => `[${m.index}] got ${m.actual} want ${m.expected}`).join(", ");
      const label = writer ? `${writer.key} (in place over ${place.name})` : place.name;
      problems.push(`${label}: ${count} of ${place.elements} elements off (rtol ${tol.rtol}, atol ${tol.atol}): ${shown}`);
    }
  }
  return problems;
}

/** Why `backend` cannot run this case, or undefined when it declares support. */
export function unsupportedReason(backend: Backend, c: ConformanceCase): string | undefined {
  const dtypes = backend.capabilities().kernelDTypes[c.kernel as KernelName] ?? [];
  if (dtypes.length === 0) return `${backend.name} does not implement ${c.kernel}`;
  const needed = c.kernel === "cast" ? [c.args.srcDtype as string, c.args.dstDtype as string] : [c.dtype];
  const missing = needed.find((t) => !dtypes.includes(t as never));
  return missing ? `${backend.name} declares no ${missing} for ${c.kernel}` : undefined;
}
