// sim_options.h: how the simulator orders work (to expose ordering bugs).
#pragma once

namespace kiln_sim {

struct SimOptions {
  bool reverse_blocks = false;   // run the grid's blocks last to first
  bool reverse_threads = false;  // resume a block's threads last to first
  // The grid.y limit that kernels which split a launch plan for (max_grid_y() in
  // kiln_cuda.h); a GPU's is 65535. Lowered, it makes small shapes take the split path.
  unsigned max_grid_y = 65535;
};

void set_options(const SimOptions& options);
SimOptions options();

}  // namespace kiln_sim
