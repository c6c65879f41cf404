// device.h: one opened device as the backend sees it: a stream, the caching
// allocator, pinned staging for copies, scratch for kernels that need it, and the
// kernel table. Every call is issued on the one stream, in order.
#pragma once
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "../blas/cublaslt_matmul.h"
#include "caching_allocator.h"
#include "pinned_pool.h"
#include "raw_runtime.h"

namespace kiln {

struct KernelCall;          // kiln_cuda.h
enum class MatmulTiles;     // kiln_cuda.h

/** A device-to-host copy in flight: wait() (any thread) then take the bytes. */
struct PendingDownload {
  PinnedBuffer staging;
  size_t bytes = 0;
};

class Device {
 public:
  explicit Device(int ordinal);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const DeviceProperties& properties() const { return props_; }
  int ordinal() const { return ordinal_; }
  /** The stream every kernel and copy is issued on (others order themselves against it with events). */
  RawStream stream() const { return stream_; }
  void* alloc(size_t bytes) { return allocator_.allocate(bytes); }
  void free(void* p) { allocator_.release(p); }
  void upload(void* dst, const void* src, size_t bytes);
  void copy(void* dst, const void* src, size_t bytes);
  PendingDownload begin_download(const void* src, size_t bytes);
  /** Blocks until the copy is done, copies into `out`, recycles the staging. Thread-safe. */
  void finish_download(PendingDownload& d, void* out);
  /** An event after everything issued so far; the caller waits on it and destroys it. */
  RawEvent fence();
  void launch(const std::string& kernel, const double* values, int count);
  /**
   * The scratch bytes a launch of `kernel` with these values would ask for, found by
   * running its launcher with nothing launched (sizing_call()); 0 for none.
   */
  size_t scratch_bytes(const std::string& kernel, const double* values, int count);
  /** Grows the kernels' scratch block to at least `bytes` now (a later launch that needs no more allocates nothing). */
  void reserve_scratch(size_t bytes);
  /** Bytes of the kernels' scratch block (0 before any kernel asked for scratch). */
  size_t scratch_reserved() const { return scratch_bytes_; }
  /** Enqueues a timing mark after everything issued so far (the device takes the time as it reaches it). */
  void mark();
  /** Hands over the marks enqueued since the last call, oldest first. */
  std::vector<RawEvent> take_marks();
  /**
   * Blocks until the last of `marks` is done, writes each mark's milliseconds after the
   * first into `ms`, and keeps the events for later marks. Any thread.
   */
  void read_marks(std::vector<RawEvent>& marks, double* ms);
  /** From now on kernels are recorded into a graph (they run when it is launched); copies are refused meanwhile. */
  void begin_graph();
  /** Ends the recording: the new graph's id. */
  int end_graph();
  /**
   * Runs graph `id`'s kernels as recorded; false, running nothing, when a kernel's scratch
   * memory has moved since the recording (the graph would use the old block): record again.
   */
  bool launch_graph(int id);
  void drop_graph(int id);
  AllocatorStats allocator_stats() const { return allocator_.stats(); }
  void empty_cache() { allocator_.empty_cache(); }
  size_t free_bytes() const { return raw_free_bytes(); }
  /** Routes matmuls through cuBLASLt loaded from `path` (throws DeviceFailure why not); returns its version. */
  std::string use_cublaslt(const std::string& path, bool tf32);

 private:
  static void* scratch_for(void* self, size_t bytes);
  /** The call `fn` gets: these values, this device's settings, scratch from `scratch_fn`. */
  KernelCall call_with(const double* values, int count, void* (*scratch_fn)(void*, size_t), void* owner);
  int ordinal_;
  DeviceProperties props_;
  RawStream stream_ = nullptr;
  CachingAllocator allocator_;
  PinnedPool pinned_;
  void* scratch_ = nullptr;
  size_t scratch_bytes_ = 0;
  std::unique_ptr<CublasLt> blas_;
  std::vector<RawEvent> marks_;        // enqueued since the last take_marks()
  std::mutex spare_mutex_;             // read_marks() runs on a worker thread
  std::vector<RawEvent> spare_marks_;  // read, ready to record again
  struct Graph {
    RawGraph exec;
    uint64_t scratch_generation;  // scratch_generation_ when it was recorded
  };
  bool recording_ = false;
  uint64_t scratch_generation_ = 0;  // counts moves of the scratch block
  uint64_t recording_generation_ = 0;
  int next_graph_ = 1;
  std::unordered_map<int, Graph> graphs_;
  void refuse_while_recording(const char* what) const;
  /** Keeps taken marks' events for later marks. */
  void recycle_marks(std::vector<RawEvent>& marks);
  bool simt_matmul_, simt_attention_, wmma_matmul_, wmma_attention_;  // read from the environment at open
  bool wgmma_matmul_;  // the wgmma kernel: on an sm_90 device with this build's sm_90a code unless KILN_MATMUL_PATH names another kernel; the simulator with =wgmma
  MatmulTiles matmul_tiles_;  // KILN_MATMUL_TILES=large / small, else by the tile count
  bool wgmma_attention_;  // KILN_ATTENTION_PATH=wgmma: an sm_90 device with this build's sm_90a code, or the simulator
  int wgmma_attention_rows_;  // KILN_ATTENTION_WGMMA_ROWS: 64 (one warpgroup a block) or 128 (two)
  int mma_attention_keys_;  // KILN_ATTENTION_MMA_KEYS: 32 or 64 keys a loop tile of the mma.sync forward (heads up to 64)
  bool dq_from_stored_ds_;  // KILN_ATTENTION_DQ=stored-ds: the mma.sync backward's dQ from the dS its dK/dV pass stored
};

}  // namespace kiln
