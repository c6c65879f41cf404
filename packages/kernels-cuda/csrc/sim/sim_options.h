// sim_options.h: how the simulator orders work (to expose ordering bugs).
#pragma once

namespace kiln_sim {

struct SimOptions {
  bool reverse_blocks = false;   // run the grid's blocks last to first
  bool reverse_threads = false;  // resume a block's threads last to first
};

void set_options(const SimOptions& options);
SimOptions options();

}  // namespace kiln_sim
