/** How the CUDA simulator runs a grid (createCudaSimBackend). */
export interface CudaSimOptions {
  /** Run the grid's blocks last to first (exposes races between blocks). */
  reverseBlocks?: boolean;
  /** Resume a block's threads last to first. */
  reverseThreads?: boolean;
  /**
   * Let one warp at a time past warp exchanges (shuffles, mma, ldmatrix): each warp runs
   * on alone until it waits at a __syncthreads, so warps drift as far apart as the
   * barriers allow (exposes a missing barrier between warps that share a buffer).
   */
  warpsInTurn?: boolean;
  /**
   * The grid.y limit that kernels splitting a launch plan for: a GPU's 65535 (the
   * default); a lower figure (1 to 65535) makes small shapes take the split path.
   */
  maxGridY?: number;
}
