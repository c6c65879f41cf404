#include "caching_allocator.h"

#include <cstdio>
#include <string>

#include "raw_runtime.h"

namespace kiln {
namespace {
constexpr size_t kSmallLimit = size_t{1} << 20;
constexpr size_t kSmallQuantum = 512;
constexpr size_t kSegment = size_t{2} << 20;

std::string mib(size_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}
}  // namespace

size_t CachingAllocator::rounded_size(size_t bytes) {
  if (bytes == 0) bytes = 1;
  size_t q = bytes <= kSmallLimit ? kSmallQuantum : kSegment;
  return (bytes + q - 1) / q * q;
}

CachingAllocator::~CachingAllocator() {
  try {
    empty_cache();
    for (auto& [p, size] : live_) raw_free(p);
  } catch (...) {
    // the device is going away; nothing useful to report from a destructor
  }
}

void* CachingAllocator::allocate(size_t bytes) {
  const size_t size = rounded_size(bytes);
  auto it = free_blocks_.lower_bound(size);
  const size_t limit = size <= kSmallLimit ? size : size + size / 4;
  if (it != free_blocks_.end() && it->first <= limit) {
    void* p = it->second;
    size_t got = it->first;
    free_blocks_.erase(it);
    live_[p] = got;
    stats_.allocated_bytes += got;
    stats_.cache_hits++;
    stats_.live_blocks++;
    return p;
  }
  void* p = raw_malloc(size);
  if (!p) {
    empty_cache();
    p = raw_malloc(size);
  }
  if (!p) {
    throw DeviceFailure("out of device memory: requested " + mib(size) + ", " + mib(raw_free_bytes()) + " free on the device, " + mib(stats_.reserved_bytes) +
                            " reserved by kiln (" + mib(stats_.allocated_bytes) + " in use)",
                        true);
  }
  live_[p] = size;
  stats_.allocated_bytes += size;
  stats_.reserved_bytes += size;
  if (stats_.reserved_bytes > stats_.peak_reserved_bytes) stats_.peak_reserved_bytes = stats_.reserved_bytes;
  stats_.device_allocations++;
  stats_.live_blocks++;
  return p;
}

void CachingAllocator::release(void* p) {
  auto it = live_.find(p);
  if (it == live_.end()) throw DeviceFailure("release of a device address this allocator does not hold");
  free_blocks_.emplace(it->second, p);
  stats_.allocated_bytes -= it->second;
  stats_.live_blocks--;
  live_.erase(it);
}

void CachingAllocator::empty_cache() {
  for (auto& [size, p] : free_blocks_) {
    raw_free(p);
    stats_.reserved_bytes -= size;
  }
  free_blocks_.clear();
}

}  // namespace kiln
