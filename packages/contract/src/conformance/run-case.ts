import type { Backend, BufferHandle, BufferSlice } from "../backend.js";
import { isFloatDType } from "../dtype.js";
import { decodeElements, encodeToBytes } from "../host-codec.js";
import { type KernelName, kernelSpecs } from "../kernels/index.js";
import type { OperandSpec } from "../kernels/spec.js";
import { type ConformanceCase, caseName } from "./case.js";
import { hashString, seededRandom } from "./rng.js";
import { TOLERANCES, compareValues, looser } from "./tolerance.js";

/** Bytes of sentinel before and after every operand; a backend must leave them alone. */
const GUARD = 64;
const SENTINEL = 0xa5;

/** The operands a case uses: required ones plus the optional ones it names. */
export function caseOperands(c: ConformanceCase): OperandSpec[] {
  const spec = kernelSpecs[c.kernel] as { operands(a: unknown): OperandSpec[] };
  return spec.operands(c.args).filter((s) => !s.optional || (c.present ?? []).includes(s.key));
}

/** Test data for every operand (outputs too, so untouched or accumulated elements show), rounded to its dtype. */
export function caseInputs(c: ConformanceCase): Record<string, Uint8Array> {
  const rand = seededRandom(hashString(caseName(c)));
  const values: Record<string, Float64Array> = {};
  const specs = caseOperands(c);
  for (const s of specs) {
    const v = new Float64Array(s.elements);
    const init = s.init ?? { kind: "uniform", lo: -1, hi: 1 };
    for (let i = 0; i < v.length; i++) {
      if (init.kind === "uniform") v[i] = init.lo + (init.hi - init.lo) * rand();
      else if (init.kind === "index") v[i] = Math.floor(rand() * init.max);
      else v[i] = rand() < 0.1 ? -1 : Math.floor(rand() * init.max);
    }
    values[s.key] = decodeElements(encodeToBytes(v, s.dtype), s.dtype, s.elements);
  }
  c.derive?.(c.args, values);
  return Object.fromEntries(specs.map((s) => [s.key, encodeToBytes(values[s.key], s.dtype)]));
}

interface Placed {
  spec: OperandSpec;
  buffer: BufferHandle;
  slice: BufferSlice;
  bytes: Uint8Array;
  /** Another operand's key when this one shares its memory (in-place). */
  aliasOf?: string;
}

/** Uploads each operand inside guard bytes, calls the kernel, and downloads every buffer whole. */
export async function executeCase(backend: Backend, c: ConformanceCase, inputs: Record<string, Uint8Array>) {
  const placed: Record<string, Placed> = {};
  const specs = caseOperands(c);
  const [aliasOut, aliasIn] = c.inPlace ?? [];
  for (const s of specs) {
    if (s.key === aliasOut) continue;
    const bytes = inputs[s.key];
    const buffer = backend.alloc(GUARD + bytes.byteLength + GUARD);
    const image = new Uint8Array(buffer.byteLength).fill(SENTINEL);
    image.set(bytes, GUARD);
    backend.upload(buffer, image);
    placed[s.key] = { spec: s, buffer, slice: { buffer, byteOffset: GUARD }, bytes };
  }
  if (aliasOut && aliasIn) {
    const target = placed[aliasIn];
    placed[aliasOut] = { ...target, spec: specs.find((s) => s.key === aliasOut)!, aliasOf: aliasIn };
  }
  const args: Record<string, unknown> = { ...c.args };
  for (const [key, p] of Object.entries(placed)) args[key] = p.slice;
  try {
    (backend.kernels[c.kernel] as (a: unknown) => void)(args);
    await backend.synchronize();
    const images: Record<string, Uint8Array> = {};
    for (const [key, p] of Object.entries(placed)) {
      const image = new Uint8Array(p.buffer.byteLength);
      await backend.download(p.buffer, image);
      images[key] = image;
    }
    return { placed, images };
  } finally {
    for (const [key, p] of Object.entries(placed)) if (!p.aliasOf || key === p.aliasOf) backend.free(p.buffer);
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
  const caseTol = TOLERANCES[c.dtype];
  for (const [key, p] of Object.entries(got.placed)) {
    if (p.aliasOf) continue;
    const image = got.images[key];
    const n = p.bytes.byteLength;
    for (const [lo, hi] of [[0, GUARD], [GUARD + n, GUARD + n + GUARD]]) {
      const bad = image.subarray(lo, hi).findIndex((b) => b !== SENTINEL);
      if (bad >= 0) problems.push(`${key}: byte ${lo + bad - GUARD} outside the operand was written`);
    }
    const writer = Object.values(got.placed).find((q) => q.aliasOf === key);
    const written = p.spec.role !== "in" || writer !== undefined;
    const actual = image.subarray(GUARD, GUARD + n);
    if (!written) {
      const changed = actual.findIndex((b, i) => b !== p.bytes[i]);
      if (changed >= 0) problems.push(`${key}: input was modified (byte ${changed})`);
      continue;
    }
    const spec = writer ? writer.spec : p.spec;
    const expected = want.images[key].subarray(GUARD, GUARD + n);
    const a = decodeElements(actual, spec.dtype, spec.elements);
    const e = decodeElements(expected, spec.dtype, spec.elements);
    const tol = isFloatDType(spec.dtype) ? looser(TOLERANCES[spec.dtype], caseTol) : TOLERANCES[spec.dtype];
    const { mismatches, count } = compareValues(a, e, tol);
    if (count > 0) {
      const shown = mismatches.map((m) => `[${m.index}] got ${m.actual} want ${m.expected}`).join(", ");
      problems.push(`${writer ? `${writer.spec.key} (in place over ${key})` : key}: ${count} of ${spec.elements} elements off (rtol ${tol.rtol}, atol ${tol.atol}): ${shown}`);
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

