import { KernelArgumentError, type MatmulArgs, bytesPerElement, matmulSpec, matmulStrides, wideDtype } from "@kiln/contract";
import type { BackendMemory } from "./backend-memory.js";
import type { KernelRuntime } from "./kernel-runtime.js";
import type { MatmulDType } from "./matmul-call.js";
import { dispatchMatmul } from "./matmul-dispatch.js";

/** Inclusive-exclusive byte ranges overlap. */
const overlaps = (a0: number, a1: number, b0: number, b1: number) => a0 < b1 && b0 < a1;

const MATMUL_DTYPES: readonly MatmulDType[] = ["f32", "bf16", "f16"];

/**
 * The contract's matmul kernel (f32, bf16 or f16 storage, C also f32 with `cDtype`, f32 sums) on the
 * wasm runtime: the native kernels when the runtime has them, else the WebAssembly one.
 */
export function backendMatmul(rt: KernelRuntime, memory: BackendMemory, args: MatmulArgs): void {
  matmulSpec.check(args);
  const dtype = args.dtype as MatmulDType;
  if (!MATMUL_DTYPES.includes(dtype)) {
    throw new KernelArgumentError(`matmul in ${String(args.dtype)} is not implemented by the wasm backend`, {
      where: "matmul",
      hint: "use dtype f32, bf16 or f16 (capabilities().kernelDTypes lists what each kernel takes)",
    });
  }
  const s = matmulStrides(args);
  const ranges: Record<string, [number, number]> = {};
  for (const spec of matmulSpec.operands(args)) {
    const op = (args as unknown as Record<string, MatmulArgs["a"] | undefined>)[spec.key];
    if (op === undefined) continue;
    const bytes = spec.elements * bytesPerElement(spec.dtype);
    const ptr = memory.address(op, bytes, `matmul.${spec.key}`);
    ranges[spec.key] = [ptr, ptr + bytes];
  }
  const c = ranges.c;
  for (const key of ["a", "b", "bias"]) {
    const r = ranges[key];
    if (r && overlaps(r[0], r[1], c[0], c[1])) {
      throw new KernelArgumentError(`matmul.c overlaps matmul.${key}`, { where: "matmul", hint: "write C into a separate buffer" });
    }
  }
  dispatchMatmul(rt, {
    m: args.m,
    n: args.n,
    k: args.k,
    batch: s.batch,
    a: ranges.a[0],
    b: ranges.b[0],
    c: c[0],
    bias: ranges.bias ? ranges.bias[0] : 0,
    strideA: s.strideA,
    strideB: s.strideB,
    strideC: s.strideC,
    lda: s.lda,
    transA: args.transA ?? false,
    transB: args.transB ?? false,
    accumulate: args.accumulate ?? false,
    alpha: args.alpha ?? 1,
    dtype,
    cDtype: wideDtype(args.dtype, args.cDtype) as MatmulDType,
  });
}
