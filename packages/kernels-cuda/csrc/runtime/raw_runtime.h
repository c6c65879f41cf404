// raw_runtime.h: the few device-runtime calls kiln makes, implemented twice: on
// the CUDA runtime (raw_runtime_cuda.cc) and on host memory for the simulator
// (sim/raw_runtime_sim.cc). Failures throw kiln::DeviceFailure.
#pragma once
#include <cstddef>
#include <stdexcept>
#include <string>

namespace kiln {

struct DeviceFailure : std::runtime_error {
  explicit DeviceFailure(const std::string& what, bool out_of_memory = false) : std::runtime_error(what), out_of_memory(out_of_memory) {}
  bool out_of_memory;
};

struct DeviceProperties {
  std::string name;
  size_t total_bytes = 0;
  size_t free_bytes = 0;
  int major = 0;
  int minor = 0;
  int multiprocessors = 0;
  size_t shared_memory_per_block_optin = 0;
  size_t shared_memory_per_sm = 0;
};

struct RuntimeStatus {
  bool simulated = false;
  int driver_version = 0;   // 0 when no driver
  int runtime_version = 0;
  int device_count = 0;
  std::string error;        // why no device is usable, empty when one is
};

using RawStream = void*;
using RawEvent = void*;
using RawGraph = void*;

RuntimeStatus raw_status();
DeviceProperties raw_open_device(int ordinal);  // makes it current on this thread
void raw_set_device(int ordinal);  // makes an opened device current on the calling thread
/** nullptr (no throw) when the device has no room. */
void* raw_malloc(size_t bytes);
void raw_free(void* p);
void* raw_host_alloc(size_t bytes);  // pinned host memory
void raw_host_free(void* p);
RawStream raw_stream_create();
void raw_stream_destroy(RawStream s);
void raw_memcpy_h2d(void* dst, const void* src, size_t bytes, RawStream s);
void raw_memcpy_d2h(void* dst, const void* src, size_t bytes, RawStream s);
void raw_memcpy_d2d(void* dst, const void* src, size_t bytes, RawStream s);
RawEvent raw_event_create();
/** An event that also takes the time at which the device reaches it (raw_event_elapsed_ms). */
RawEvent raw_timing_event_create();
void raw_event_destroy(RawEvent e);
void raw_event_record(RawEvent e, RawStream s);
/** Work issued to `s` after this call waits until `e` (as recorded now) is done; the host does not wait. */
void raw_stream_wait_event(RawStream s, RawEvent e);
bool raw_event_done(RawEvent e);
void raw_event_wait(RawEvent e);  // blocks the calling thread
/** Milliseconds between two done timing events (negative when `to` came first). */
double raw_event_elapsed_ms(RawEvent from, RawEvent to);
void raw_stream_wait_idle(RawStream s);
/** From now on the kernels issued to `s` are recorded into a graph, not run (CUDA stream capture). */
void raw_capture_begin(RawStream s);
/** Ends the recording on `s`: a graph ready to launch (throws why not, the recording ended either way). */
RawGraph raw_capture_end(RawStream s);
/** Runs a graph's kernels on `s`, in their recorded order. */
void raw_graph_launch(RawGraph g, RawStream s);
void raw_graph_destroy(RawGraph g);
size_t raw_free_bytes();

}  // namespace kiln
