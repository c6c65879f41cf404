import { encodeElements } from "@kiln/contract";
import { elementCount } from "../graph/tensor.js";
import { fillNormal, streamOf } from "../rng/philox.js";
import type { ParamLayout } from "./param-layout.js";

/**
 * The initial parameters of a layout as host bytes (the flat buffer's image):
 * normal weights from each parameter's own Philox stream of `seed`, ones, zeros.
 */
export function initialParamBytes(layout: ParamLayout, seed: number): Uint8Array {
  const bytes = new Uint8Array(layout.bytes);
  for (const s of layout.specs) {
    const n = elementCount(s.shape);
    const values = new Float32Array(n);
    if (s.init.kind === "normal") fillNormal(values, seed, streamOf(s.name), s.init.std);
    else if (s.init.kind === "ones") values.fill(1);
    const at = layout.offsets.get(s.name)!;
    if (layout.dtype === "f32") new Float32Array(bytes.buffer, at, n).set(values);
    else encodeElements(values, layout.dtype, bytes.subarray(at));
  }
  return bytes;
}
