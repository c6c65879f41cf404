// raw_runtime_cuda.cc: raw_runtime.h on the CUDA runtime (linked statically, so the
// addon loads on a machine without a driver and reports it).
#include <cuda_runtime.h>

#include "../kiln_cuda.h"
#include "raw_runtime.h"

namespace kiln {
namespace {

void check(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return;
  cudaGetLastError();  // clear a sticky-free error so the next call is not blamed
  throw DeviceFailure(std::string(what) + ": " + cudaGetErrorString(err) + " (" + cudaGetErrorName(err) + ")", err == cudaErrorMemoryAllocation);
}

cudaStream_t stream_of(RawStream s) { return static_cast<cudaStream_t>(s); }

}  // namespace

void check_launch(const char* kernel) {
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) throw DeviceFailure(std::string("launching ") + kernel + ": " + cudaGetErrorString(err));
}

RuntimeStatus raw_status() {
  RuntimeStatus st;
  cudaDriverGetVersion(&st.driver_version);
  cudaRuntimeGetVersion(&st.runtime_version);
  cudaError_t err = cudaGetDeviceCount(&st.device_count);
  if (st.driver_version == 0 || err == cudaErrorInsufficientDriver || err == cudaErrorNoDevice) {
    st.device_count = 0;
    st.error = st.driver_version == 0 || err == cudaErrorInsufficientDriver ? "no NVIDIA driver" : "no CUDA device";
    if (st.driver_version != 0 && err == cudaErrorInsufficientDriver) st.error = "the NVIDIA driver is older than this build's CUDA runtime";
  } else if (err != cudaSuccess) {
    st.device_count = 0;
    st.error = cudaGetErrorString(err);
  }
  cudaGetLastError();
  return st;
}

DeviceProperties raw_open_device(int ordinal) {
  check(cudaSetDevice(ordinal), "selecting the device");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, ordinal), "reading device properties");
  DeviceProperties p;
  p.name = prop.name;
  p.major = prop.major;
  p.minor = prop.minor;
  p.multiprocessors = prop.multiProcessorCount;
  p.shared_memory_per_block_optin = prop.sharedMemPerBlockOptin;
  p.shared_memory_per_sm = prop.sharedMemPerMultiprocessor;
  check(cudaMemGetInfo(&p.free_bytes, &p.total_bytes), "reading device memory");
  return p;
}

void raw_set_device(int ordinal) { check(cudaSetDevice(ordinal), "selecting the device"); }

void* raw_malloc(size_t bytes) {
  void* p = nullptr;
  cudaError_t err = cudaMalloc(&p, bytes);
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    return nullptr;
  }
  check(err, "cudaMalloc");
  return p;
}
void raw_free(void* p) { check(cudaFree(p), "cudaFree"); }
void* raw_host_alloc(size_t bytes) {
  void* p = nullptr;
  check(cudaHostAlloc(&p, bytes, cudaHostAllocDefault), "cudaHostAlloc");
  return p;
}
void raw_host_free(void* p) { check(cudaFreeHost(p), "cudaFreeHost"); }
RawStream raw_stream_create() {
  cudaStream_t s = nullptr;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "creating a stream");
  return s;
}
void raw_stream_destroy(RawStream s) { cudaStreamDestroy(stream_of(s)); }
void raw_memcpy_h2d(void* dst, const void* src, size_t n, RawStream s) { check(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, stream_of(s)), "upload"); }
void raw_memcpy_d2h(void* dst, const void* src, size_t n, RawStream s) { check(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, stream_of(s)), "download"); }
void raw_memcpy_d2d(void* dst, const void* src, size_t n, RawStream s) { check(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, stream_of(s)), "copy"); }
RawEvent raw_event_create() {
  cudaEvent_t e = nullptr;
  check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "creating an event");
  return e;
}
RawEvent raw_timing_event_create() {
  cudaEvent_t e = nullptr;
  check(cudaEventCreate(&e), "creating a timing event");
  return e;
}
void raw_event_destroy(RawEvent e) { cudaEventDestroy(static_cast<cudaEvent_t>(e)); }
void raw_event_record(RawEvent e, RawStream s) { check(cudaEventRecord(static_cast<cudaEvent_t>(e), stream_of(s)), "recording an event"); }
void raw_stream_wait_event(RawStream s, RawEvent e) {
  check(cudaStreamWaitEvent(stream_of(s), static_cast<cudaEvent_t>(e), 0), "ordering two streams");
}
bool raw_event_done(RawEvent e) {
  cudaError_t err = cudaEventQuery(static_cast<cudaEvent_t>(e));
  if (err == cudaErrorNotReady) return false;
  check(err, "querying an event");
  return true;
}
void raw_event_wait(RawEvent e) { check(cudaEventSynchronize(static_cast<cudaEvent_t>(e)), "waiting for the device"); }
double raw_event_elapsed_ms(RawEvent from, RawEvent to) {
  float ms = 0.0f;
  check(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(from), static_cast<cudaEvent_t>(to)), "reading the time between two events");
  return ms;
}
void raw_stream_wait_idle(RawStream s) { check(cudaStreamSynchronize(stream_of(s)), "waiting for the device"); }
void raw_capture_begin(RawStream s) {
  // Relaxed: a kernel's scratch may still be allocated while recording (it then makes the graph stale, see Device).
  check(cudaStreamBeginCapture(stream_of(s), cudaStreamCaptureModeRelaxed), "starting to record a CUDA graph");
}
RawGraph raw_capture_end(RawStream s) {
  cudaGraph_t graph = nullptr;
  check(cudaStreamEndCapture(stream_of(s), &graph), "ending the recording of a CUDA graph");
  cudaGraphExec_t exec = nullptr;
  const cudaError_t err = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  check(err, "instantiating a CUDA graph");
  return exec;
}
void raw_graph_launch(RawGraph g, RawStream s) { check(cudaGraphLaunch(static_cast<cudaGraphExec_t>(g), stream_of(s)), "launching a CUDA graph"); }
void raw_graph_destroy(RawGraph g) { cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(g)); }
size_t raw_free_bytes() {
  size_t free_b = 0, total = 0;
  check(cudaMemGetInfo(&free_b, &total), "reading device memory");
  return free_b;
}

}  // namespace kiln
