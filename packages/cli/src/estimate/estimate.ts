import {
  type ModelConfig,
  type MemoryPlan,
  type RecomputePolicy,
  type RecomputeSetting,
  archOf,
  chooseRunPlan,
  paramLayout,
  type TrainingStepCosts,
  planTrainingMemory,
  rooflineSeconds,
  stepRoofline,
  trainingFlopsPerToken,
  trainingStepCosts,
} from "@kiln/core";
import type { DeviceProfile } from "./devices.js";
import { type ProcessPeak, processPeak } from "./process-peak.js";

export interface Estimate {
  parameters: number;
  /** Parameters a token's forward pass multiplies (all but unrouted experts and learned positions). */
  activeParameters: number;
  tokensPerStep: number;
  flopsPerToken: number;
  flopsPerStep: number;
  memory: MemoryPlan;
  /** The activations the backward pass recomputes in this plan ("auto" resolved for the device). */
  recompute: RecomputePolicy;
  /** Bytes evaluation adds to the plan (its I/O: it runs in the training arena), as kiln train's banner counts it. */
  evaluation: number;
  /** The whole training process's expected peak RSS, as kiln train's banner shows it. */
  process: ProcessPeak;
  device: DeviceProfile;
  /** Fraction of device memory the plan uses. */
  fits: boolean;
  usedFraction: number;
  /** Largest micro-batch whose plan stays within 90% of device memory (0: not even 1). */
  largestBatch: number;
  /** Step time at 100% of peak (a lower bound). */
  idealStepSeconds: number;
  /**
   * A tighter lower bound where the device's memory bandwidth is known: every kernel call
   * of the planned step at the longer of its FLOPs at peak and its operand bytes at the
   * bandwidth (rooflineSeconds); with the bytes the step moves, and the same by kernel.
   * Absent otherwise.
   */
  roofline?: { stepSeconds: number; bytesPerStep: number; mfu: number; kernels: KernelRoofline[] };
}

/** One kernel's calls in a step at the roofline: what they move and compute, and their least time. */
export interface KernelRoofline {
  kernel: string;
  /** Calls a step (micro-batch calls times the micro-batches). */
  calls: number;
  bytes: number;
  flops: number;
  seconds: number;
  /** Whether most of that time is the calls' FLOPs at peak rather than their bytes at the bandwidth. */
  bound: "compute" | "memory";
}

export const HEADROOM = 0.9;

/** Memory and FLOPs of training `model` with these sizes on `device`, from the exact plan. */
export function estimateTraining(
  model: ModelConfig,
  batch: number,
  seqLen: number,
  gradAccum: number,
  dtype: "f32" | "bf16" | "f16",
  device: DeviceProfile,
  recompute: RecomputeSetting = "auto",
  prefetch = 2,
  /** Ranks the optimizer state is sharded over (--shard-optimizer with --ranks): the plan is one rank's. */
  shardRanks = 1,
): Estimate {
  const planOnHost = device.threads !== undefined;
  const kind = planOnHost ? "cpu" : "gpu";
  const chosen = chooseRunPlan({ model, batchSize: batch, seqLen, recompute, shardRanks }, dtype, { kind, memoryBytes: device.memoryBytes });
  const policy = chosen.recompute;
  const plan = (b: number) => planTrainingMemory(model, b, seqLen, dtype, policy, kind, undefined, shardRanks);
  const memory = chosen.training.memory;
  const evaluation = chosen.memory.evaluation;
  const process = processPeak({ planned: memory.total + evaluation, planOnHost, threads: device.threads ?? 1, batchSize: batch, seqLen, prefetch });
  const tokensPerStep = batch * seqLen * gradAccum;
  const flopsPerToken = trainingFlopsPerToken(model, seqLen);
  const budget = device.memoryBytes * HEADROOM;
  let lo = 0;
  let hi = 1;
  while (hi <= 65536 && plan(hi).total <= budget) {
    lo = hi;
    hi *= 2;
  }
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if (plan(mid).total <= budget) lo = mid;
    else hi = mid;
  }
  return {
    parameters: paramLayout(model).count,
    activeParameters: paramLayout(model).count - archOf(model).inactiveParams(model),
    tokensPerStep,
    flopsPerToken,
    flopsPerStep: flopsPerToken * tokensPerStep,
    memory,
    recompute: policy,
    evaluation,
    process,
    device,
    fits: memory.total + evaluation <= device.memoryBytes,
    usedFraction: memory.total / device.memoryBytes,
    largestBatch: lo,
    idealStepSeconds: (flopsPerToken * tokensPerStep) / device.peakFlops[dtype],
    ...(device.memoryBandwidth && device.peakFlops[dtype] > 0
      ? { roofline: rooflineOf(trainingStepCosts(model, batch, seqLen, dtype, policy, kind), gradAccum, device.peakFlops[dtype], device.memoryBandwidth, flopsPerToken * tokensPerStep) }
      : {}),
  };
}

/** The step's roofline (each planned kernel call at the longer of its FLOPs at peak and its bytes at the bandwidth) and the MFU it allows. */
function rooflineOf(calls: TrainingStepCosts, gradAccum: number, peak: number, bandwidth: number, modelFlopsPerStep: number): NonNullable<Estimate["roofline"]> {
  const { seconds, bytes } = stepRoofline(calls, gradAccum, peak, bandwidth);
  return { stepSeconds: seconds, bytesPerStep: bytes, mfu: modelFlopsPerStep / peak / seconds, kernels: kernelRooflines(calls, gradAccum, peak, bandwidth) };
}

/** The step's calls at the roofline by kernel, most time first. */
function kernelRooflines(calls: TrainingStepCosts, gradAccum: number, peak: number, bandwidth: number): KernelRoofline[] {
  const byKernel = new Map<string, KernelRoofline & { computeSeconds: number }>();
  const parts = [[calls.before, 1], [calls.microBatch, gradAccum], [calls.after, 1]] as const;
  for (const [list, times] of parts) {
    for (const c of list) {
      const row = byKernel.get(c.kernel) ?? { kernel: c.kernel, calls: 0, bytes: 0, flops: 0, seconds: 0, bound: "memory", computeSeconds: 0 };
      const least = rooflineSeconds([c], peak, bandwidth);
      row.calls += times;
      row.bytes += times * c.bytes;
      row.flops += times * c.flops;
      row.seconds += times * least;
      if (c.flops / peak >= least) row.computeSeconds += times * least;
      byKernel.set(c.kernel, row);
    }
  }
  return [...byKernel.values()]
    .map(({ computeSeconds, ...row }) => ({ ...row, bound: computeSeconds > row.seconds / 2 ? ("compute" as const) : ("memory" as const) }))
    .sort((a, b) => b.seconds - a.seconds);
}
