/** The four transA / transB pairs of a matmul, and a case label for each. */
export type Transposes = { transA: boolean; transB: boolean };

export const TRANSPOSE_PAIRS: readonly Transposes[] = [
  { transA: false, transB: false },
  { transA: false, transB: true },
  { transA: true, transB: false },
  { transA: true, transB: true },
];

export const transposeLabel = (p: Transposes) => `${p.transA ? "transA" : "A"} ${p.transB ? "transB" : "B"}`;
