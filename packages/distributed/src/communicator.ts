import type { GradientSync } from "@kiln/core";

/**
 * Sync backends: "single" (one rank, nothing to do), "cpu" (host staging, summed at rank 0 over kiln's TCP star),
 * "gloo" (host staging, Gloo's TCP ring), "nccl" (device buffers; not yet).
 */
export type SyncBackendKind = "single" | "cpu" | "gloo" | "nccl";

/**
 * How data-parallel ranks agree on gradients: one communicator per rank, and
 * every rank calls the same collectives in the same order. It is the Trainer's
 * gradient-sync hook (`GradientSync`, defined in core: all-reduce sum or mean
 * of f32 and bf16 device operands, broadcast, all-reduce of host scalars)
 * plus what a run needs around training. Operands are the backend's own
 * buffers: the `cpu` and `gloo` communicators stage them through the host, an NCCL one
 * would reduce them on the device. Every call fails after the communicator's
 * timeout, and a failure names the rank that caused it.
 */
export interface Communicator extends GradientSync {
  readonly kind: SyncBackendKind;
  /** What the gradients go through, for the banner ("shared memory", "Gloo's TCP ring", ...; for cpu, why not shared memory). */
  readonly dataPath: string;
  /** Resolves when every rank has reached it. */
  barrier(): Promise<void>;
  /** Closes the connections; collectives called afterwards fail. */
  close(): Promise<void>;
}
