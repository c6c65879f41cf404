#include "device.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include "../kiln_cuda.h"

namespace kiln {

namespace {
bool env_is(const char* name, const char* value) {
  const char* e = std::getenv(name);
  return e != nullptr && std::strcmp(e, value) == 0;
}

/** Whether this build has the wgmma kernels (SASS for sm_90a). */
constexpr bool sm90a_built() {
#if defined(KILN_CUDA_SM90A)
  return true;
#else
  return false;
#endif
}
}  // namespace

Device::Device(int ordinal)
    : ordinal_(ordinal),
      props_(raw_open_device(ordinal)),
      stream_(raw_stream_create()),
      simt_matmul_(env_is("KILN_MATMUL_PATH", "simt")),
      simt_attention_(env_is("KILN_ATTENTION_PATH", "simt")),
      wmma_matmul_(env_is("KILN_MATMUL_PATH", "wmma")),
      wmma_attention_(env_is("KILN_ATTENTION_PATH", "wmma")),
      wgmma_matmul_(env_is("KILN_MATMUL_PATH", "wgmma")),
      matmul_tiles_(env_is("KILN_MATMUL_TILES", "large")   ? MatmulTiles::Large
                    : env_is("KILN_MATMUL_TILES", "small") ? MatmulTiles::Small
                                                           : MatmulTiles::ByCount),
      wgmma_attention_(env_is("KILN_ATTENTION_PATH", "wgmma")),
      wgmma_attention_rows_(env_is("KILN_ATTENTION_WGMMA_ROWS", "128") ? 128 : 64),
      // The mma.sync attention's defaults, from an H100's gpt2-small step (2026-11-28): key
      // tiles of 64 where two blocks fit an SM and dQ from the stored dS, each about 0.25 ms
      // a step faster there.
      mma_attention_keys_(env_is("KILN_ATTENTION_MMA_KEYS", "32")   ? 32
                          : env_is("KILN_ATTENTION_MMA_KEYS", "64") ? 64
                                                                    : default_mma_attention_keys(props_.shared_memory_per_sm)),
      dq_from_stored_ds_(!env_is("KILN_ATTENTION_DQ", "recompute")) {
#if !defined(KILN_CUDA_SIM)
  const bool sm90 = sm90a_built() && props_.major == 9 && props_.minor == 0;
  if (wgmma_matmul_ && !sm90) {
    raw_stream_destroy(stream_);
    throw DeviceFailure("KILN_MATMUL_PATH=wgmma needs an sm_90 GPU (H100, H200) and this build's sm_90a code; this device is sm_" + std::to_string(props_.major) +
                        std::to_string(props_.minor) + ": unset KILN_MATMUL_PATH, or use kiln");
  }
  if (wgmma_attention_ && !sm90) {
    raw_stream_destroy(stream_);
    throw DeviceFailure("KILN_ATTENTION_PATH=wgmma needs an sm_90 GPU (H100, H200) and this build's sm_90a code; this device is sm_" + std::to_string(props_.major) +
                        std::to_string(props_.minor) + ": unset KILN_ATTENTION_PATH");
  }
  // On sm_90 kiln's own bf16/f16 matmuls are the wgmma ones unless a path names another kernel.
  if (sm90 && !simt_matmul_ && !wmma_matmul_ && !env_is("KILN_MATMUL_PATH", "mma")) wgmma_matmul_ = true;
  // And bf16/f16 attention runs on the wgmma kernels unless a path names another: on an
  // H100 they took gpt2-small's step from 20.5 ms (mma.sync) to 19.6.
  if (sm90 && !simt_attention_ && !wmma_attention_ && !env_is("KILN_ATTENTION_PATH", "mma")) wgmma_attention_ = true;
#endif
}

Device::~Device() {
  try {
    raw_stream_wait_idle(stream_);
    blas_.reset();
    if (scratch_) allocator_.release(scratch_);
    for (auto& g : graphs_) raw_graph_destroy(g.second.exec);
    for (RawEvent e : marks_) raw_event_destroy(e);
    for (RawEvent e : spare_marks_) raw_event_destroy(e);
    raw_stream_destroy(stream_);
  } catch (...) {
    // nothing to report from a destructor
  }
}

void Device::refuse_while_recording(const char* what) const {
  if (recording_) throw DeviceFailure(std::string(what) + " while a CUDA graph is being recorded: only kernels may be recorded");
}

void Device::upload(void* dst, const void* src, size_t bytes) {
  refuse_while_recording("an upload");
  if (bytes == 0) return;
  PinnedBuffer b = pinned_.acquire(bytes);
  std::memcpy(b.ptr, src, bytes);  // the caller may reuse `src` as soon as we return
  raw_memcpy_h2d(dst, b.ptr, bytes, stream_);
  b.last_use = raw_event_create();
  raw_event_record(b.last_use, stream_);
  pinned_.give_back(b);
}

void Device::copy(void* dst, const void* src, size_t bytes) {
  refuse_while_recording("a copy");
  if (bytes) raw_memcpy_d2d(dst, src, bytes, stream_);
}

PendingDownload Device::begin_download(const void* src, size_t bytes) {
  refuse_while_recording("a download");
  PendingDownload d;
  d.bytes = bytes;
  d.staging = pinned_.acquire(bytes);
  if (bytes) raw_memcpy_d2h(d.staging.ptr, src, bytes, stream_);
  d.staging.last_use = raw_event_create();
  raw_event_record(d.staging.last_use, stream_);
  return d;
}

void Device::finish_download(PendingDownload& d, void* out) {
  raw_event_wait(d.staging.last_use);
  if (d.bytes) std::memcpy(out, d.staging.ptr, d.bytes);
  pinned_.give_back(d.staging);
  d.staging = PinnedBuffer{};
}

RawEvent Device::fence() {
  refuse_while_recording("waiting for the device");
  RawEvent e = raw_event_create();
  raw_event_record(e, stream_);
  return e;
}

void Device::mark() {
  refuse_while_recording("a timing mark");
  RawEvent e = nullptr;
  {
    std::lock_guard<std::mutex> lock(spare_mutex_);
    if (!spare_marks_.empty()) {
      e = spare_marks_.back();
      spare_marks_.pop_back();
    }
  }
  if (!e) e = raw_timing_event_create();
  marks_.push_back(e);
  raw_event_record(e, stream_);
}

std::vector<RawEvent> Device::take_marks() {
  std::vector<RawEvent> taken;
  taken.swap(marks_);
  return taken;
}

void Device::read_marks(std::vector<RawEvent>& marks, double* ms) {
  if (!marks.empty()) raw_event_wait(marks.back());
  for (size_t i = 0; i < marks.size(); i++) ms[i] = raw_event_elapsed_ms(marks.front(), marks[i]);
  recycle_marks(marks);
}

void Device::recycle_marks(std::vector<RawEvent>& marks) {
  std::lock_guard<std::mutex> lock(spare_mutex_);
  spare_marks_.insert(spare_marks_.end(), marks.begin(), marks.end());
  marks.clear();
}

void* Device::scratch_for(void* self, size_t bytes) {
  auto* d = static_cast<Device*>(self);
  if (bytes > d->scratch_bytes_) {
    // Safe without a sync: with one stream, the old block's reuse is ordered after its last kernel.
    if (d->scratch_) d->allocator_.release(d->scratch_);
    d->scratch_ = nullptr;
    d->scratch_ = d->allocator_.allocate(bytes);
    d->scratch_bytes_ = CachingAllocator::rounded_size(bytes);
    d->scratch_generation_++;  // graphs recorded before use the old block: stale
  }
  return d->scratch_;
}

void Device::begin_graph() {
  refuse_while_recording("starting another recording");
  raw_capture_begin(stream_);
  recording_ = true;
  recording_generation_ = scratch_generation_;
}

int Device::end_graph() {
  if (!recording_) throw DeviceFailure("no CUDA graph is being recorded");
  recording_ = false;
  RawGraph exec = raw_capture_end(stream_);
  const int id = next_graph_++;
  // A scratch block that moved while recording: the earlier kernels use the old one; stale from the start.
  graphs_[id] = Graph{exec, recording_generation_};
  return id;
}

bool Device::launch_graph(int id) {
  refuse_while_recording("launching a graph");
  auto it = graphs_.find(id);
  if (it == graphs_.end()) throw DeviceFailure("no CUDA graph " + std::to_string(id) + " (released?)");
  if (it->second.scratch_generation != scratch_generation_) return false;
  raw_graph_launch(it->second.exec, stream_);
  return true;
}

void Device::drop_graph(int id) {
  auto it = graphs_.find(id);
  if (it == graphs_.end()) return;
  raw_graph_destroy(it->second.exec);
  graphs_.erase(it);
}

std::string Device::use_cublaslt(const std::string& path, bool tf32) {
  blas_ = std::make_unique<CublasLt>(path, tf32);
  return blas_->version();
}

KernelCall Device::call_with(const double* values, int count, void* (*scratch_fn)(void*, size_t), void* owner) {
  return KernelCall{values, count, static_cast<cudaStream_t>(stream_), scratch_fn, owner, blas_.get(), simt_matmul_, simt_attention_, wmma_matmul_, wmma_attention_, wgmma_matmul_, matmul_tiles_, wgmma_attention_, wgmma_attention_rows_, mma_attention_keys_, dq_from_stored_ds_, props_.shared_memory_per_block_optin};
}

namespace {
Launcher launcher_named(const std::string& kernel) {
  Launcher fn = find_kernel(kernel);
  if (!fn) throw DeviceFailure("this build of the CUDA kernels has no kernel named " + kernel);
  return fn;
}
}  // namespace

void Device::launch(const std::string& kernel, const double* values, int count) {
  launcher_named(kernel)(call_with(values, count, &Device::scratch_for, this));
}

size_t Device::scratch_bytes(const std::string& kernel, const double* values, int count) {
  Launcher fn = launcher_named(kernel);
  size_t most = 0;
  // The launcher gets a stand-in block (never dereferenced: nothing launches), 2^40-aligned like any real one is 256-aligned.
  auto record = [](void* owner, size_t bytes) -> void* {
    size_t& m = *static_cast<size_t*>(owner);
    if (bytes > m) m = bytes;
    return reinterpret_cast<void*>(uintptr_t{1} << 40);
  };
  struct Sizing {
    Sizing() { sizing_call() = true; }
    ~Sizing() { sizing_call() = false; }
  } sizing;
  fn(call_with(values, count, record, &most));
  return most;
}

void Device::reserve_scratch(size_t bytes) {
  if (bytes > 0) scratch_for(this, bytes);  // while recording, as a launch would: the graph is then stale
}

}  // namespace kiln
