// raw_runtime_sim.cc: raw_runtime.h on host memory. Launches run when they are
// issued (sim_scheduler.cc), so copies are plain memcpy and events are always done.
// The "device" holds KILN_SIM_MEMORY_BYTES (default 4 GiB) so that out-of-memory
// handling can be exercised, and offers KILN_SIM_SHARED_PER_BLOCK bytes of shared memory
// a block (default an A100's 163 KiB; 232448, an H100's, takes the paths that only an
// H100's shared memory allows), read when the device is opened.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <functional>
#include <unordered_map>
#include <vector>

#include "../kiln_cuda.h"
#include "../runtime/raw_runtime.h"

namespace kiln {
namespace {

std::mutex g_mu;
std::unordered_map<void*, size_t> g_sizes;
size_t g_in_use = 0;

size_t capacity() {
  static const size_t cap = [] {
    const char* env = std::getenv("KILN_SIM_MEMORY_BYTES");
    return env ? static_cast<size_t>(std::strtoull(env, nullptr, 10)) : size_t{4} << 30;
  }();
  return cap;
}

}  // namespace

void check_launch(const char*) {}

RuntimeStatus raw_status() {
  RuntimeStatus st;
  st.simulated = true;
  st.device_count = 1;
  return st;
}

DeviceProperties raw_open_device(int ordinal) {
  if (ordinal != 0) throw DeviceFailure("the simulator has one device, ordinal 0");
  DeviceProperties p;
  p.name = "cuda-sim (CUDA kernels on the host CPU)";
  p.total_bytes = capacity();
  p.free_bytes = capacity() - g_in_use;
  p.major = 8;
  p.minor = 0;
  p.multiprocessors = 1;
  const char* shared = std::getenv("KILN_SIM_SHARED_PER_BLOCK");
  p.shared_memory_per_block_optin = shared ? static_cast<size_t>(std::strtoull(shared, nullptr, 10)) : size_t{163} * 1024;
  p.shared_memory_per_sm = p.shared_memory_per_block_optin + 1024;  // as on GPUs: 1 KiB a block reserved
  return p;
}

void raw_set_device(int ordinal) {
  if (ordinal != 0) throw DeviceFailure("the simulator has one device, ordinal 0");
}

void* raw_malloc(size_t bytes) {
  std::lock_guard<std::mutex> lock(g_mu);
  size_t rounded = (bytes + 255) & ~size_t{255};
  if (g_in_use + rounded > capacity()) return nullptr;
  void* p = std::aligned_alloc(256, rounded);
  if (!p) return nullptr;
  g_sizes[p] = rounded;
  g_in_use += rounded;
  return p;
}
void raw_free(void* p) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_sizes.find(p);
  if (it == g_sizes.end()) throw DeviceFailure("raw_free of an address that was not allocated");
  g_in_use -= it->second;
  g_sizes.erase(it);
  std::free(p);
}
void* raw_host_alloc(size_t bytes) {
  void* p = std::malloc(bytes ? bytes : 1);
  if (!p) throw DeviceFailure("out of host memory", true);
  return p;
}
void raw_host_free(void* p) { std::free(p); }
// Streams are distinct tokens (so a library handed one can tell them apart); work runs when issued.
RawStream raw_stream_create() {
  static std::atomic<uintptr_t> next{1};
  return reinterpret_cast<RawStream>(next++);
}
void raw_stream_destroy(RawStream) {}
void raw_memcpy_h2d(void* dst, const void* src, size_t n, RawStream) { std::memcpy(dst, src, n); }
void raw_memcpy_d2h(void* dst, const void* src, size_t n, RawStream) { std::memcpy(dst, src, n); }
void raw_memcpy_d2d(void* dst, const void* src, size_t n, RawStream) { std::memmove(dst, src, n); }
// Plain events are one shared token; a timing event holds the host time of its last
// record, which is when the simulated device reached it (launches run as they are issued).
namespace {
const RawEvent kPlainEvent = reinterpret_cast<RawEvent>(1);
struct TimingEvent {
  double ms = 0.0;
};
}  // namespace
RawEvent raw_event_create() { return kPlainEvent; }
RawEvent raw_timing_event_create() { return new TimingEvent; }
void raw_event_destroy(RawEvent e) {
  if (e != kPlainEvent) delete static_cast<TimingEvent*>(e);
}
void raw_event_record(RawEvent e, RawStream) {
  if (e != kPlainEvent) static_cast<TimingEvent*>(e)->ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
double raw_event_elapsed_ms(RawEvent from, RawEvent to) { return static_cast<TimingEvent*>(to)->ms - static_cast<TimingEvent*>(from)->ms; }
void raw_stream_wait_event(RawStream, RawEvent) {}
bool raw_event_done(RawEvent) { return true; }
void raw_event_wait(RawEvent) {}
void raw_stream_wait_idle(RawStream) {}
// A graph is the launches recorded between begin and end (kiln_sim::record_launches), run again in order.
namespace {
struct SimGraph {
  std::vector<std::function<void()>> launches;
};
SimGraph* g_recording = nullptr;
}  // namespace
void raw_capture_begin(RawStream) {
  if (g_recording) throw DeviceFailure("a CUDA graph is already being recorded");
  g_recording = new SimGraph;
  ::kiln_sim::record_launches(&g_recording->launches);
}
RawGraph raw_capture_end(RawStream) {
  if (!g_recording) throw DeviceFailure("no CUDA graph is being recorded");
  ::kiln_sim::record_launches(nullptr);
  SimGraph* g = g_recording;
  g_recording = nullptr;
  return g;
}
void raw_graph_launch(RawGraph g, RawStream) {
  for (const auto& launch : static_cast<SimGraph*>(g)->launches) launch();
}
void raw_graph_destroy(RawGraph g) { delete static_cast<SimGraph*>(g); }
size_t raw_free_bytes() {
  std::lock_guard<std::mutex> lock(g_mu);
  return capacity() - g_in_use;
}

}  // namespace kiln
