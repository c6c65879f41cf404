import { bytesPerElement } from "@kiln/contract";
import type { Graph } from "../graph/graph.js";
import type { ParamLayout } from "../model/param-layout.js";

/** Bytes of a gradient bucket unless configured otherwise (PyTorch DDP's bucket_cap_mb). */
export const DEFAULT_BUCKET_BYTES = 25 * 1024 * 1024;

/** A contiguous byte range of the flat gradient buffer, all-reduced as one call. */
export interface GradientBucket {
  byteOffset: number;
  /** f32 elements (or 16-bit ones, as the layout's dtype) the range spans, the alignment padding between parameters included. */
  elements: number;
  /** The parameters whose gradients lie in it, in layout order. */
  params: string[];
  /** Index of the last graph node that writes one of its gradients: after it runs, the bucket is final. */
  readyAfterNode: number;
}

/**
 * Cuts the flat gradient buffer of `layout` into buckets of about `bucketBytes`
 * at parameter boundaries, from the end of the buffer back (backward writes the
 * last layers' gradients first), and orders them by when the training graph
 * finishes writing them. A parameter larger than `bucketBytes` is a bucket of its own.
 */
export function planGradientBuckets(graph: Graph, layout: ParamLayout, bucketBytes: number): GradientBucket[] {
  if (!(bucketBytes > 0)) throw new RangeError(`gradient bucket size must be positive, got ${bucketBytes}`);
  const lastWriter = lastGradientWriters(graph);
  const elementBytes = bytesPerElement(layout.dtype);
  const buckets: GradientBucket[] = [];
  let end = layout.bytes;
  let params: string[] = [];
  let start = end;
  const close = () => {
    if (params.length === 0) return;
    const ready = Math.max(...params.map((p) => lastWriter.get(p) ?? -1));
    buckets.push({ byteOffset: start, elements: (end - start) / elementBytes, params: params.reverse(), readyAfterNode: ready });
    end = start;
    params = [];
  };
  for (let i = layout.stored.length - 1; i >= 0; i--) {
    const s = layout.stored[i];
    const at = layout.offsets.get(s.name)!;
    // The bucket takes this parameter (and the padding after it) unless that would push it past the cap.
    if (params.length > 0 && end - at > bucketBytes) close();
    params.push(s.name);
    start = at;
  }
  close();
  return buckets.sort((a, b) => a.readyAfterNode - b.readyAfterNode || b.byteOffset - a.byteOffset);
}

/** Parameter name -> index of the last node that writes (accumulates into) its gradient. */
function lastGradientWriters(graph: Graph): Map<string, number> {
  const out = new Map<string, number>();
  for (const node of graph.nodes) {
    for (const id of node.outputs) {
      const t = graph.info(id);
      if (t.kind === "grad") out.set(graph.info(t.gradOf!).name, node.index);
    }
  }
  return out;
}
