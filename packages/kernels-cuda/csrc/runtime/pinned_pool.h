// pinned_pool.h: page-locked host buffers that uploads and downloads stage through,
// so copies run asynchronously on the stream. A buffer returns to the pool with the
// event of its last copy and is handed out again only once that event completed.
// Buffers over 64 MiB are freed after use instead of kept.
#pragma once
#include <cstddef>
#include <mutex>
#include <vector>

#include "raw_runtime.h"

namespace kiln {

struct PinnedBuffer {
  void* ptr = nullptr;
  size_t bytes = 0;
  RawEvent last_use = nullptr;
};

class PinnedPool {
 public:
  PinnedPool() = default;
  PinnedPool(const PinnedPool&) = delete;
  PinnedPool& operator=(const PinnedPool&) = delete;
  ~PinnedPool();
  PinnedBuffer acquire(size_t bytes);
  /** Returns `b`; `b.last_use` (owned by the pool from now on) marks when its copy ends. */
  void give_back(PinnedBuffer b);

 private:
  std::mutex mu_;
  std::vector<PinnedBuffer> idle_;
};

}  // namespace kiln
