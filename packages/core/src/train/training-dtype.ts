import { type Backend, type Capabilities, DeviceError, type DType, FLOAT_DTYPES, type FloatDType, type KernelName } from "@kiln/contract";
import type { Graph } from "../graph/graph.js";
import type { KernelNodeAttrs } from "../graph/kernel-node.js";
import type { ModelConfig } from "../model/config.js";
import { buildTrainingGraph } from "../model/build-graph.js";
import { paramLayout } from "../model/param-layout.js";

/** What a training dtype may be asked as: a storage dtype, or "auto" (the best one the device runs). */
export type TrainingDTypeChoice = FloatDType | "auto";
export const TRAINING_DTYPE_CHOICES: readonly TrainingDTypeChoice[] = [...FLOAT_DTYPES, "auto"];

/** Kernel calls a trainer issues besides its graph's: optimizer, norm, finiteness, zeroing, widening. */
function optimizerCalls(dtype: FloatDType): [KernelName, DType][] {
  const calls: [KernelName, DType][] = [
    ["adamW", "f32"],
    ["sumSquares", "f32"],
    ["fill", dtype],
  ];
  if (dtype !== "f32") calls.push(["cast", dtype], ["cast", "f32"], ["add", "f32"], ["fill", "f32"]);
  if (dtype === "f16") calls.push(["checkFinite", "f32"], ["fill", "i32"]);
  return calls;
}

/** Every (kernel, dtype) a training step on `graph` calls, the trainer's own calls included. */
export function trainingKernelCalls(graph: Graph, dtype: FloatDType): Map<KernelName, Set<DType>> {
  const calls = new Map<KernelName, Set<DType>>();
  const add = (kernel: KernelName, d: DType) => {
    if (!calls.has(kernel)) calls.set(kernel, new Set());
    calls.get(kernel)!.add(d);
  };
  for (const node of graph.nodes) {
    const a = node.attrs as unknown as KernelNodeAttrs;
    add(a.kernel, a.args.dtype as DType);
  }
  for (const [kernel, d] of optimizerCalls(dtype)) add(kernel, d);
  return calls;
}

/** "bf16 for matmul, add" for every dtype with calls the backend does not declare. */
export function undeclaredKernelCalls(caps: Capabilities, calls: Map<KernelName, Set<DType>>): string[] {
  const missing = new Map<DType, KernelName[]>();
  for (const [kernel, dtypes] of calls) {
    for (const d of dtypes) if (!(caps.kernelDTypes[kernel] ?? []).includes(d)) missing.set(d, [...(missing.get(d) ?? []), kernel]);
  }
  return [...missing].map(([d, kernels]) => `${d} for ${kernels.join(", ")}`);
}

/** Throws a DeviceError naming the backend and the missing kernels when it cannot run a training step in `dtype`. */
export function assertBackendTrains(backend: Backend, dtype: FloatDType, graph: Graph): void {
  const missing = undeclaredKernelCalls(backend.capabilities(), trainingKernelCalls(graph, dtype));
  if (missing.length === 0) return;
  const others = FLOAT_DTYPES.filter((d) => d !== dtype).join(" or ");
  // Without an f32 kernel no dtype trains (the optimizer runs in f32): only another backend helps.
  const needsF32 = missing.some((m) => m.startsWith("f32 "));
  throw new DeviceError(`the ${backend.name} backend cannot train in ${dtype}: it does not declare ${missing.join("; ")}`, {
    where: `--dtype ${dtype}`,
    hint: needsF32
      ? "train on a backend that runs these kernels (kiln doctor lists each backend's kernels), e.g. --target-device cpu"
      : `use --dtype auto (the best dtype this backend runs) or ${others}, or train on a backend that declares ${dtype} (kiln doctor lists each backend's kernels)`,
  });
}

function computeCapability(caps: Capabilities): number | undefined {
  const cc = caps.device.computeCapability;
  return cc === undefined ? undefined : Number(cc);
}

/**
 * The dtype "auto" trains in on a backend, and why: bf16 where the device runs it
 * natively (the CPU, where kernels widen to f32 anyway, and GPUs of compute
 * capability 8.0 and later), else f16 with dynamic loss scaling, else f32.
 * A dtype is a candidate only when the backend declares every kernel a step calls.
 */
export function chooseTrainingDType(backend: Backend, model: ModelConfig): { dtype: FloatDType; reason: string } {
  const caps = backend.capabilities();
  const runs = (dtype: FloatDType) => undeclaredKernelCalls(caps, trainingKernelCalls(buildTrainingGraph(model, paramLayout(model, dtype), 1, 1).graph, dtype)).length === 0;
  const cc = computeCapability(caps);
  const gpu = caps.device.kind === "gpu";
  const nativeBf16 = !gpu || (cc !== undefined && cc >= 8);
  if (nativeBf16 && runs("bf16")) {
    return { dtype: "bf16", reason: gpu ? `compute capability ${caps.device.computeCapability} runs bf16` : `${backend.name} backend runs bf16 (computed in f32, stored in 16 bits)` };
  }
  const noBf16 = nativeBf16 ? `${backend.name} backend does not declare bf16` : `compute capability ${caps.device.computeCapability ?? "unknown"} is below 8.0 (no native bf16)`;
  if (runs("f16")) return { dtype: "f16", reason: `${noBf16}; f16 with dynamic loss scaling` };
  return { dtype: "f32", reason: `${noBf16} and f16 is not declared either` };
}
