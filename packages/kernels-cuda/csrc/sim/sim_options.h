// sim_options.h: how the simulator orders work (to expose ordering bugs).
#pragma once

namespace kiln_sim {

struct SimOptions {
  bool reverse_blocks = false;   // run the grid's blocks last to first
  bool reverse_threads = false;  // resume a block's threads last to first
  // Release one warp at a time from warp exchanges (the first in resume order), so a
  // warp runs on alone until it waits at a __syncthreads: warps drift as far apart as
  // barriers allow (exposes a missing barrier between warps sharing a buffer).
  bool warps_in_turn = false;
  // The grid.y limit that kernels which split a launch plan for (max_grid_y() in
  // kiln_cuda.h); a GPU's is 65535. Lowered, it makes small shapes take the split path.
  unsigned max_grid_y = 65535;
};

void set_options(const SimOptions& options);
SimOptions options();

}  // namespace kiln_sim
