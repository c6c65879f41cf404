import { type Backend, type BufferHandle, encodeElements } from "@kiln/contract";
import { elementCount } from "../graph/tensor.js";
import { fillNormal, streamOf } from "../rng/philox.js";
import type { ParamLayout, ParamSpec } from "./param-layout.js";

/** One parameter's initial values, written into `into` (or a new array): N(0, std^2) from its own Philox stream of `seed`, ones, or zeros. */
function initialValues(s: ParamSpec, seed: number, into?: Float32Array): Float32Array {
  const n = elementCount(s.shape);
  const values = into ? into.subarray(0, n) : new Float32Array(n);
  if (s.init.kind === "normal") fillNormal(values, seed, streamOf(s.name), s.init.std);
  else values.fill(s.init.kind === "ones" ? 1 : 0);
  return values;
}

function storageBytes(values: Float32Array, layout: ParamLayout): ArrayBufferView {
  if (layout.dtype === "f32") return values;
  const bytes = new Uint8Array(values.length * 2);
  encodeElements(values, layout.dtype, bytes);
  return bytes;
}

/** The initial parameters of a layout as host bytes (the flat buffer's image). */
export function initialParamBytes(layout: ParamLayout, seed: number): Uint8Array {
  const bytes = new Uint8Array(layout.bytes);
  for (const s of layout.specs) {
    const v = storageBytes(initialValues(s, seed), layout);
    bytes.set(new Uint8Array(v.buffer, v.byteOffset, v.byteLength), layout.offsets.get(s.name)!);
  }
  return bytes;
}

/**
 * Initialises the parameters in `params` one at a time, so the host never holds
 * more than the largest parameter (not a copy of the whole model).
 */
export function uploadInitialParams(backend: Backend, params: BufferHandle, layout: ParamLayout, seed: number): void {
  const scratch = new Float32Array(Math.max(...layout.specs.map((s) => elementCount(s.shape))));
  for (const s of layout.specs) {
    backend.upload({ buffer: params, byteOffset: layout.offsets.get(s.name)! }, storageBytes(initialValues(s, seed, scratch), layout));
  }
}
