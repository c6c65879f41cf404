import { type ConformanceCase, conformanceCases } from "@kiln/contract/conformance";
import { describeCasesOnSchedules } from "./support/simulator.js";

// Kernels that move rows as 16-byte vectors when the rows are whole vectors, on the
// simulator against the f64 reference. The warp-per-row LayerNorm / RMSNorm kernels
// (csrc/norm_warp_rows.h, up to 4 vectors a lane): 1 to 4 vectors a lane with the last lane group partly empty (dims 8,
// 16, 264, 768, 1024 in 16-bit; 96 and 512 in f32), row counts that leave a block's
// warps idle, in place, without a bias, and backward chunk splits whose last chunk is
// short (100 rows: 13 chunks of 8; 2100 rows: 132 chunks of 16, two rows a warp).
// sumRows with a vector of columns a thread (matmul.cu): one chunk written straight to
// the output, several chunks through the partial rows, the last column tile partly empty.
// The pass that adds the partial rows (chunk_partials.h) on 1 to 32 lanes of up to 8
// chunks, lanes left empty, more than 8 chunks a lane, and one to three sets a launch.
const hasColSums = (c: ConformanceCase) => (c.present ?? []).includes("dXColSums");
const suite = conformanceCases();
/** The suite's case for `kernel` of `shape` and `dtype` (its derive and present kept), with other arguments. */
function like(kernel: string, shape: string, dtype: string, args: Record<string, unknown>, label: string, pick: (c: ConformanceCase) => boolean = () => true): ConformanceCase {
  const base = suite.find((c) => c.kernel === kernel && c.shape === shape && c.dtype === dtype && pick(c));
  if (!base) throw new Error(`no ${kernel} ${shape} ${dtype} case in the suite`);
  return { ...base, label, args: { ...base.args, ...args } };
}
const withBias = (c: ConformanceCase) => (c.present ?? []).length > 0;
const f32Grads = (c: ConformanceCase) => c.args.gradDtype === "f32";

const cases: ConformanceCase[] = [
  like("layerNormForward", "large", "bf16", { rows: 37, dim: 768 }, "warp rows: 3 vectors a lane, 37 rows"),
  like("layerNormForward", "large", "f16", { rows: 9, dim: 8 }, "warp rows: one vector a row"),
  like("layerNormForward", "large", "f32", { rows: 20, dim: 512 }, "warp rows: 4 vectors a lane"),
  like("layerNormForward", "options", "bf16", { rows: 10, dim: 1024 }, "warp rows: 4 vectors a lane, no bias"),
  like("layerNormForward", "in-place", "bf16", { rows: 11, dim: 264 }, "warp rows: in place, 33 vectors a row"),
  like("rmsNormForward", "large", "bf16", { rows: 17, dim: 1024 }, "warp rows: 4 vectors a lane"),
  like("layerNormBackward", "large", "bf16", { rows: 100, dim: 768 }, "warp rows: 13 chunks, f32 grads", (c) => withBias(c) && f32Grads(c)),
  like("layerNormBackward", "large", "f32", { rows: 300, dim: 96 }, "warp rows: 38 chunks", withBias),
  like("layerNormBackward", "options", "f16", { rows: 2100, dim: 16 }, "warp rows: 132 chunks of 16 rows, no bias"),
  like("rmsNormBackward", "large", "bf16", { rows: 17, dim: 1024 }, "warp rows: 3 chunks", (c) => !f32Grads(c)),
  like("sumRows", "large", "bf16", { rows: 50, cols: 776, accumulate: false }, "vectors: one chunk, 97 vectors a row", (c) => !f32Grads(c)),
  like("sumRows", "large", "f16", { rows: 700, cols: 136, accumulate: true }, "vectors: 11 chunks, f32 out", f32Grads),
  like("sumRows", "large", "f32", { rows: 257, cols: 520 }, "vectors: 5 chunks, 130 vectors a row"),
  like("sumRows", "large", "f32", { rows: 19200, cols: 8, accumulate: true }, "vectors: 300 chunks, 10 a lane"),
  like("layerNormBackward", "large", "bf16", { rows: 2048, dim: 64 }, "warp rows: 256 chunks on 32 lanes, dWeight, dBias and dX's column sums", (c) => hasColSums(c) && f32Grads(c)),
  like("rmsNormBackward", "large", "f16", { rows: 1000, dim: 24 }, "warp rows: 125 chunks, dWeight and dX's column sums", hasColSums),
  like("geluBackward", "large", "bf16", { n: 2600 * 16, cols: 16 }, "column sums: 41 chunks", hasColSums),
];

describeCasesOnSchedules("row kernels on 16-byte vectors, cuda-sim", cases, (i) => (i % 3 === 0 ? 3 : 1));
