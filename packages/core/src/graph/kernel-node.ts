import { type KernelArgsMap, type KernelName, kernelSpecs } from "@kiln/contract";
import type { Graph, GraphNode } from "./graph.js";
import type { CompileContext, RuntimeScalars } from "./op.js";

/** A kernel operand bound to a tensor, `offset` elements into it (packed qkv slices). */
export interface BoundOperand {
  id: number;
  offset?: number;
}

export interface KernelNodeAttrs {
  kernel: KernelName;
  operands: Record<string, BoundOperand>;
  /** Every non-buffer kernel argument (dims, eps, flags). */
  args: Record<string, unknown>;
  /** Kernel arguments read from the runtime scalars at each run, e.g. { lossScale: "lossScale" }. */
  runtimeArgs?: Record<string, keyof RuntimeScalars>;
  /** Runtime u32 arguments taken xor a fixed value of the node's (a dropout seed xor the node's own salt). */
  runtimeXor?: Record<string, number>;
  /** The gradient rule of this node (a key of `gradRules` in ops/index.ts); absent = not differentiable. */
  grad?: string;
}

/** A kernel node's attributes. */
export function kernelNodeAttrs(node: GraphNode): KernelNodeAttrs {
  return node.attrs as unknown as KernelNodeAttrs;
}

/** The operand is bound, at the start of its tensor. */
export function boundWhole(b: BoundOperand | undefined): b is BoundOperand {
  return b !== undefined && (b.offset ?? 0) === 0;
}

type OperandsOf<K extends KernelName> = Partial<Record<keyof KernelArgsMap[K] & string, number | BoundOperand>>;
type ArgsOf<K extends KernelName> = Omit<KernelArgsMap[K], "dtype"> | Record<string, unknown>;

/**
 * Appends a node that runs one kernel. Which tensors it reads and writes follows
 * from the kernel's operand roles; `inout` operands count as both.
 */
export function addKernelNode<K extends KernelName>(
  g: Graph,
  kernel: K,
  operands: OperandsOf<K>,
  args: ArgsOf<K>,
  extra: { grad?: string; runtimeArgs?: KernelNodeAttrs["runtimeArgs"]; extraAttrs?: Record<string, unknown> } = {},
): GraphNode {
  const bound: Record<string, BoundOperand> = {};
  for (const [key, v] of Object.entries(operands)) {
    if (v === undefined) continue;
    bound[key] = typeof v === "number" ? { id: v } : (v as BoundOperand);
  }
  const specArgs = { ...args } as never;
  const inputs = new Set<number>();
  const outputs = new Set<number>();
  for (const s of kernelSpecs[kernel].operands(specArgs)) {
    const b = bound[s.key];
    if (!b) continue;
    if (s.role !== "out") inputs.add(b.id);
    if (s.role !== "in") outputs.add(b.id);
  }
  const attrs: KernelNodeAttrs = { kernel, operands: bound, args: args as Record<string, unknown>, ...extra };
  return g.node([...inputs], [...outputs], { ...attrs, ...(extra.extraAttrs ?? {}) });
}

/** The call that runs a kernel node: its kernel with operands resolved once. */
export function compileKernelNode(node: GraphNode, ctx: CompileContext): () => void {
  const a = kernelNodeAttrs(node);
  const args: Record<string, unknown> = { ...a.args };
  for (const [key, b] of Object.entries(a.operands)) args[key] = ctx.operand(b.id, b.offset ?? 0);
  const call = ctx.kernels[a.kernel] as (x: unknown) => void;
  const runtime = a.runtimeArgs ? Object.entries(a.runtimeArgs) : [];
  // Fixed arguments: checked and resolved once where the backend prepares calls.
  if (runtime.length === 0) return ctx.prepare ? ctx.prepare(a.kernel, args as never) : () => call(args);
  // Runtime scalars are read at each call: their scratch (which no scalar sizes) is reserved now.
  const xor = a.runtimeXor ?? {};
  const read = () => {
    for (const [key, name] of runtime) args[key] = key in xor ? (ctx.runtime[name] ^ xor[key]) >>> 0 : ctx.runtime[name];
  };
  read();
  ctx.reserveScratch?.(a.kernel, args as never);
  return () => {
    read();
    call(args);
  };
}
