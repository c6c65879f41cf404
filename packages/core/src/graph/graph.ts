import { type DType, bytesPerElement } from "@kiln/contract";
import { type TensorInfo, type TensorKind, elementCount } from "./tensor.js";

/** One kernel call of the graph: the tensors it reads and writes, and its attributes (KernelNodeAttrs). */
export interface GraphNode {
  readonly index: number;
  readonly inputs: readonly number[];
  readonly outputs: readonly number[];
  readonly attrs: Readonly<Record<string, unknown>>;
  /** The model scope that created it, e.g. "transformer.h.3.attn" (for plans and recomputation). */
  readonly scope: string;
  /** True for nodes appended by autodiff. */
  readonly backward: boolean;
}

/** A LoRA pair on a weight: A (rank, in), B (out, rank), the branch scaled by alpha / rank. */
export interface LowRankAdapter {
  a: number;
  b: number;
  scale: number;
  /** Dropout on the branch's input while training (0: none; evaluation graphs have none). */
  dropout: number;
  applied: boolean;
}

/**
 * A training or inference step as data: tensors and the nodes between them, in
 * execution order. Forward nodes are traced from a model; autodiff appends the
 * reverse pass; the planner gives every tensor its bytes.
 */
export class Graph {
  readonly tensors: TensorInfo[] = [];
  readonly nodes: GraphNode[] = [];
  /**
   * Low-rank adapters (LoRA) by the id of the weight they wrap: a linear layer through that
   * weight adds scale·(x·A^T)·B^T to its product (ops/linear.ts) and marks the adapter applied.
   */
  readonly adapters = new Map<number, LowRankAdapter>();
  /**
   * Rows packed with several documents: the i32 (batch*seqLen) input saying where each token's
   * document begins in its row. Attention and rotary embeddings traced while it is set take it
   * (no query sees an earlier document; positions count from the document's start).
   */
  documentStarts: number | undefined;
  private scopes: string[] = [];
  private inBackward = false;

  tensor(shape: readonly number[], dtype: DType, kind: TensorKind, name: string, gradOf?: number, frozen?: boolean): number {
    const id = this.tensors.length;
    for (const d of shape) {
      if (!Number.isSafeInteger(d) || d < 1) throw new Error(`tensor ${name}: bad shape [${shape}]`);
    }
    this.tensors.push({ id, shape: [...shape], dtype, kind, name, ...(gradOf === undefined ? {} : { gradOf }), ...(frozen ? { frozen } : {}) });
    return id;
  }

  info(id: number): TensorInfo {
    const t = this.tensors[id];
    if (!t) throw new Error(`no tensor ${id}`);
    return t;
  }

  bytes(id: number): number {
    const t = this.info(id);
    return elementCount(t.shape) * bytesPerElement(t.dtype);
  }

  elements(id: number): number {
    return elementCount(this.info(id).shape);
  }

  /** Appends a node (addKernelNode makes them from a kernel's operands). */
  node(inputs: readonly number[], outputs: readonly number[], attrs: Record<string, unknown> = {}): GraphNode {
    const n: GraphNode = { index: this.nodes.length, inputs, outputs, attrs, scope: this.scopes.join("."), backward: this.inBackward };
    this.nodes.push(n);
    return n;
  }

  /** Tensor id -> the indices of the nodes that write it, in order. */
  writers(): Map<number, number[]> {
    const out = new Map<number, number[]>();
    for (const n of this.nodes) for (const t of n.outputs) out.set(t, [...(out.get(t) ?? []), n.index]);
    return out;
  }

  /** Replaces a node's tensors and attributes in place (a rewrite that keeps the order). */
  replaceNode(index: number, changes: Pick<GraphNode, "inputs" | "outputs" | "attrs">): void {
    this.nodes[index] = { ...this.nodes[index], ...changes };
  }

  /** Replaces the node list (a graph rewrite), renumbering the nodes in their new order. */
  setNodes(nodes: readonly Omit<GraphNode, "index">[]): void {
    this.nodes.length = 0;
    nodes.forEach((n, index) => this.nodes.push({ ...n, index }));
  }

  /** Runs `body` with `name` appended to the scope of the nodes it creates. */
  withScope<T>(name: string, body: () => T): T {
    this.scopes.push(name);
    try {
      return body();
    } finally {
      this.scopes.pop();
    }
  }

  /** Nodes created inside `body` are marked as backward nodes. */
  asBackward<T>(body: () => T): T {
    const was = this.inBackward;
    this.inBackward = true;
    try {
      return body();
    } finally {
      this.inBackward = was;
    }
  }
}
