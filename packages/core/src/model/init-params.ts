import { type Backend, type BufferHandle, encodeElements } from "@kiln/contract";
import { elementCount } from "../graph/tensor.js";
import { fillNormal, fillUniform, streamOf } from "../rng/philox.js";
import type { ParamLayout, ParamSpec } from "./param-layout.js";

/** Elements firstElement.. of a parameter's initial values, random ones from its own Philox stream of `seed`. */
function fillInit(values: Float32Array, s: ParamSpec, seed: number, firstElement: number): void {
  const stream = streamOf(s.name);
  switch (s.init.kind) {
    case "normal":
      return fillNormal(values, seed, stream, s.init.std, firstElement);
    case "uniform": {
      const bound = s.init.bound;
      fillUniform(values, seed, stream, firstElement);
      return values.forEach((u, i) => (values[i] = (2 * u - 1) * bound));
    }
    case "ssmDecayLog":
      fillUniform(values, seed, stream, firstElement);
      return values.forEach((u, i) => (values[i] = Math.log(1 + 15 * u)));
    case "ssmTimeStepBias":
      fillUniform(values, seed, stream, firstElement);
      return values.forEach((u, i) => {
        const dt = Math.max(1e-4, Math.exp(Math.log(1e-3) + u * (Math.log(1e-1) - Math.log(1e-3))));
        values[i] = dt + Math.log(-Math.expm1(-dt)); // softplus(dt + log(1 - e^-dt)) = dt
      });
    default:
      values.fill(s.init.kind === "ones" ? 1 : 0);
  }
}

function initialValues(s: ParamSpec, seed: number): Float32Array {
  const values = new Float32Array(elementCount(s.shape));
  fillInit(values, s, seed, 0);
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

/** Elements generated per upload: the host holds 1 MiB at a time, not a copy of the model. */
const CHUNK = 1 << 18;

/** Initialises the parameters in `params` chunk by chunk (the same values as initialParamBytes). */
export function uploadInitialParams(backend: Backend, params: BufferHandle, layout: ParamLayout, seed: number): void {
  const scratch = new Float32Array(CHUNK);
  const width = layout.dtype === "f32" ? 4 : 2;
  for (const s of layout.specs) {
    const n = elementCount(s.shape);
    for (let start = 0; start < n; start += CHUNK) {
      const values = scratch.subarray(0, Math.min(CHUNK, n - start));
      fillInit(values, s, seed, start);
      backend.upload({ buffer: params, byteOffset: layout.offsets.get(s.name)! + start * width }, storageBytes(values, layout));
    }
  }
}
