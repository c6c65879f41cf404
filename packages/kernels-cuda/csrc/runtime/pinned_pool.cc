#include "pinned_pool.h"

namespace kiln {
namespace {
constexpr size_t kKeepLimit = size_t{64} << 20;
constexpr size_t kMinimum = size_t{64} << 10;
}  // namespace

PinnedPool::~PinnedPool() {
  for (auto& b : idle_) {
    try {
      if (b.last_use) {
        raw_event_wait(b.last_use);
        raw_event_destroy(b.last_use);
      }
      raw_host_free(b.ptr);
    } catch (...) {
      // device gone; the process is ending
    }
  }
}

PinnedBuffer PinnedPool::acquire(size_t bytes) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < idle_.size(); i++) {
      PinnedBuffer& b = idle_[i];
      if (b.bytes < bytes || (b.last_use && !raw_event_done(b.last_use))) continue;
      PinnedBuffer out = b;
      idle_.erase(idle_.begin() + static_cast<long>(i));
      if (out.last_use) raw_event_destroy(out.last_use);
      out.last_use = nullptr;
      return out;
    }
  }
  PinnedBuffer b;
  b.bytes = bytes < kMinimum ? kMinimum : bytes;
  b.ptr = raw_host_alloc(b.bytes);
  return b;
}

void PinnedPool::give_back(PinnedBuffer b) {
  if (b.bytes > kKeepLimit) {
    if (b.last_use) {
      raw_event_wait(b.last_use);
      raw_event_destroy(b.last_use);
    }
    raw_host_free(b.ptr);
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  idle_.push_back(b);
}

}  // namespace kiln
