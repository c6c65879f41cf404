import type { DType, KernelArgsMap, KernelName } from "@kiln/contract";
import type { BackendMemory } from "./backend-memory.js";
import { backendMatmul } from "./backend-matmul.js";
import type { KernelRuntime } from "./kernel-runtime.js";
import { ADAMW_KERNELS } from "./backend-adamw.js";
import { CONVERT_KERNELS } from "./backend-convert.js";
import { CONV1D_KERNELS } from "./backend-conv1d.js";
import { COPY_KERNELS } from "./backend-copy.js";
import { CROSS_ENTROPY_KERNELS } from "./backend-cross-entropy.js";
import { ELEMENTWISE_KERNELS } from "./backend-elementwise.js";
import { REDUCE_KERNELS } from "./backend-reduce.js";
import { ATTENTION_KERNELS } from "./backend-attention.js";
import { NORM_KERNELS } from "./backend-norm.js";
import { ACTIVATION_KERNELS } from "./backend-activation.js";
import { ROPE_KERNELS } from "./backend-rope.js";
import { EMBEDDING_KERNELS } from "./backend-embedding.js";
import { GROUPED_MATMUL_KERNELS } from "./backend-grouped-matmul.js";
import { MOE_MOVE_KERNELS } from "./backend-moe-move.js";
import { MOE_ROUTE_KERNELS } from "./backend-moe-route.js";
import { SSD_KERNELS } from "./backend-ssd.js";
import { MAMBA3_KERNELS } from "./backend-mamba3.js";

/** What a contract kernel runs with: the runtime (threads, args block) and the buffer table. */
export interface WasmKernelContext {
  rt: KernelRuntime;
  memory: BackendMemory;
}

/** One contract kernel on the wasm runtime: the dtypes it takes and how it runs. */
export interface WasmKernel<K extends KernelName> {
  dtypes: readonly DType[];
  run(ctx: WasmKernelContext, args: KernelArgsMap[K]): void;
}

export type WasmKernelTable = { [K in KernelName]?: WasmKernel<K> };

/**
 * Every contract kernel this backend implements. Each kernel family lives in its
 * own backend-<family>.ts and is merged here; a kernel missing here is declared
 * with no dtypes (and the conformance suite says so).
 */
export const WASM_KERNELS: WasmKernelTable = {
  matmul: { dtypes: ["f32", "bf16", "f16"], run: (ctx, args) => backendMatmul(ctx.rt, ctx.memory, args) },
  ...CROSS_ENTROPY_KERNELS,
  ...ELEMENTWISE_KERNELS,
  ...REDUCE_KERNELS,
  ...ADAMW_KERNELS,
  ...CONVERT_KERNELS,
  ...COPY_KERNELS,
  ...CONV1D_KERNELS,
  ...SSD_KERNELS,
  ...MAMBA3_KERNELS,
  ...ATTENTION_KERNELS,
  ...NORM_KERNELS,
  ...ACTIVATION_KERNELS,
  ...ROPE_KERNELS,
  ...EMBEDDING_KERNELS,
  ...GROUPED_MATMUL_KERNELS,
  ...MOE_ROUTE_KERNELS,
  ...MOE_MOVE_KERNELS,
};
