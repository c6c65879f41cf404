// sizing_call.h: whether this thread is sizing a kernel call rather than running it.
#pragma once

namespace kiln {

/**
 * True while Device::scratch_bytes sizes a call on this thread: the launcher runs its host
 * code as it would, asking for the same scratch, but launch() and library calls return
 * without running anything.
 */
inline bool& sizing_call() {
  static thread_local bool sizing = false;
  return sizing;
}

}  // namespace kiln
