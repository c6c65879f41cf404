// caching_allocator.h: device memory in size classes, kept for reuse once freed.
// Requests round up to 512 B (up to 1 MiB) or to 2 MiB segments (above); a freed
// block waits in a free list for a request of its class (large blocks serve
// requests up to 25% smaller). With one stream, reuse is ordered after every
// kernel issued before the free, so no synchronisation is needed. When the device
// is full, every cached block is released and the request retried once.
#pragma once
#include <cstddef>
#include <map>
#include <unordered_map>

namespace kiln {

struct AllocatorStats {
  size_t allocated_bytes = 0;      // in live blocks (rounded sizes)
  size_t reserved_bytes = 0;       // held from the device: live + cached
  size_t peak_reserved_bytes = 0;
  size_t device_allocations = 0;   // raw allocations made
  size_t cache_hits = 0;
  size_t live_blocks = 0;
};

class CachingAllocator {
 public:
  CachingAllocator() = default;
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;
  ~CachingAllocator();

  /** A block of at least `bytes`; throws DeviceFailure(out_of_memory) naming requested, free and reserved bytes. */
  void* allocate(size_t bytes);
  void release(void* p);
  /** Returns every cached (free) block to the device. */
  void empty_cache();
  AllocatorStats stats() const { return stats_; }
  static size_t rounded_size(size_t bytes);

 private:
  std::multimap<size_t, void*> free_blocks_;
  std::unordered_map<void*, size_t> live_;
  AllocatorStats stats_;
};

}  // namespace kiln
