#include "nccl_communicator.h"

#include <algorithm>
#include <thread>

#include "../kiln_cuda.h"

namespace kiln {
namespace {

int nccl_type(int dtype) {
  switch (dtype) {
    case kF32: return nccl::kFloat32;
    case kBF16: return nccl::kBfloat16;
    case kF16: return nccl::kFloat16;
    default: throw NcclFailure("KILN_NCCL_ERROR", "NCCL collectives take f32, bf16 or f16 (dtype code " + std::to_string(dtype) + ")");
  }
}

const char* dtype_name(int dtype) { return dtype == kF32 ? "f32" : dtype == kBF16 ? "bf16" : "f16"; }
size_t element_bytes(int dtype) { return dtype == kF32 ? 4 : 2; }

/** Chunk `index` of chunks of `chunk_bytes` bytes starting at `data`. */
void* chunk(void* data, int index, size_t chunk_bytes) { return static_cast<char*>(data) + static_cast<size_t>(index) * chunk_bytes; }

}  // namespace

PendingCollective::~PendingCollective() {
  if (done) raw_event_destroy(done);
}

NcclCommunicator::NcclCommunicator(const NcclLibrary& lib, std::shared_ptr<Device> device, const nccl::UniqueId& id, int rank, int world_size,
                                   double timeout_ms)
    : lib_(lib),
      device_(std::move(device)),
      rank_(rank),
      world_size_(world_size),
      timeout_(std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double, std::milli>(timeout_ms))) {
  // NCCL binds the communicator to the calling thread's current device.
  raw_set_device(device_->ordinal());
  stream_ = raw_stream_create();
  nccl::Result r = lib_.comm_init_rank(&comm_, world_size, id, rank);
  if (r != nccl::kSuccess) {
    raw_stream_destroy(stream_);
    comm_ = nullptr;
    throw NcclFailure("KILN_NCCL_ERROR", "ncclCommInitRank (rank " + std::to_string(rank) + " of " + std::to_string(world_size) + ") failed: " + lib_.describe(r));
  }
}

NcclCommunicator::~NcclCommunicator() {
  try {
    close();
    raw_stream_destroy(stream_);  // CUDA releases it once its work is done
  } catch (...) {
    // nothing to report from a destructor
  }
}

void NcclCommunicator::check_usable() const {
  if (!comm_) throw NcclFailure("KILN_NCCL_ERROR", "the NCCL communicator of rank " + std::to_string(rank_) + " is " + gone_);
}

template <typename Enqueue>
std::shared_ptr<PendingCollective> NcclCommunicator::enqueue(const std::string& what, Enqueue call) {
  std::lock_guard<std::mutex> lock(mu_);
  check_usable();
  // The collective reads what the compute stream wrote before this call...
  RawEvent ready = raw_event_create();
  raw_event_record(ready, device_->stream());
  raw_stream_wait_event(stream_, ready);
  raw_event_destroy(ready);  // the wait above keeps what it needs
  nccl::Result r = call(comm_);
  if (r != nccl::kSuccess) throw NcclFailure("KILN_NCCL_ERROR", what + " failed on rank " + std::to_string(rank_) + ": " + lib_.describe(r));
  // ...and every kernel issued after this call runs after the collective.
  auto pending = std::make_shared<PendingCollective>();
  pending->what = what;
  pending->done = raw_event_create();
  raw_event_record(pending->done, stream_);
  raw_stream_wait_event(device_->stream(), pending->done);
  pending->deadline = std::chrono::steady_clock::now() + timeout_;
  in_flight_++;
  return pending;
}

std::shared_ptr<PendingCollective> NcclCommunicator::all_reduce(void* data, size_t count, int dtype, bool mean) {
  int type = nccl_type(dtype);
  int op = mean ? nccl::kAvg : nccl::kSum;
  std::string what = "allReduce of " + std::to_string(count) + " " + dtype_name(dtype) + " (" + (mean ? "mean" : "sum") + ")";
  return enqueue(what, [&](nccl::CommHandle comm) { return lib_.all_reduce(data, data, count, type, op, comm, stream_); });
}

std::shared_ptr<PendingCollective> NcclCommunicator::broadcast(void* data, size_t bytes, int root) {
  if (root < 0 || root >= world_size_) {
    throw NcclFailure("KILN_NCCL_ERROR", "broadcast from rank " + std::to_string(root) + ": the ranks are 0 to " + std::to_string(world_size_ - 1));
  }
  std::string what = "broadcast of " + std::to_string(bytes) + " bytes from rank " + std::to_string(root);
  return enqueue(what, [&](nccl::CommHandle comm) { return lib_.broadcast(data, data, bytes, nccl::kInt8, root, comm, stream_); });
}

// NCCL's in-place forms: reduce-scatter receives into this rank's chunk of the send
// buffer, all-gather sends from this rank's chunk of the receive buffer.
std::shared_ptr<PendingCollective> NcclCommunicator::reduce_scatter(void* data, size_t count, int dtype, bool mean) {
  int type = nccl_type(dtype);
  int op = mean ? nccl::kAvg : nccl::kSum;
  void* mine = chunk(data, rank_, count * element_bytes(dtype));
  std::string what = "reduceScatter of " + std::to_string(world_size_) + " x " + std::to_string(count) + " " + dtype_name(dtype) + " (" + (mean ? "mean" : "sum") + ")";
  return enqueue(what, [&](nccl::CommHandle comm) { return lib_.reduce_scatter(data, mine, count, type, op, comm, stream_); });
}

std::shared_ptr<PendingCollective> NcclCommunicator::all_gather(void* data, size_t bytes) {
  void* mine = chunk(data, rank_, bytes);
  std::string what = "allGather of " + std::to_string(world_size_) + " x " + std::to_string(bytes) + " bytes";
  return enqueue(what, [&](nccl::CommHandle comm) { return lib_.all_gather(mine, data, bytes, nccl::kInt8, comm, stream_); });
}

void NcclCommunicator::abort_and_throw(const std::string& code, const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    in_flight_--;
    if (comm_) {
      lib_.comm_abort(comm_);
      comm_ = nullptr;
      gone_ = "aborted: " + why;
    }
  }
  throw NcclFailure(code, why);
}

void NcclCommunicator::wait(const PendingCollective& c) {
  auto pause = std::chrono::microseconds(20);
  const std::string where = c.what + " on rank " + std::to_string(rank_) + " of " + std::to_string(world_size_);
  for (;;) {
    nccl::Result state = nccl::kSuccess;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!comm_) {
        in_flight_--;
        throw NcclFailure("KILN_NCCL_ERROR", where + " did not complete: the communicator is " + gone_);
      }
      nccl::Result r = lib_.comm_get_async_error(comm_, &state);
      if (r != nccl::kSuccess) state = r;
    }
    if (state != nccl::kSuccess && state != nccl::kInProgress) {
      abort_and_throw("KILN_NCCL_ERROR", where + " failed: NCCL reported " + lib_.describe(state) + "; the communicator was aborted");
    }
    bool done = false;
    try {
      done = state == nccl::kSuccess && raw_event_done(c.done);
    } catch (const DeviceFailure& e) {
      abort_and_throw("KILN_NCCL_ERROR", where + " failed: " + e.what() + "; the communicator was aborted");
    }
    if (done) {
      std::lock_guard<std::mutex> lock(mu_);
      in_flight_--;
      return;
    }
    if (std::chrono::steady_clock::now() >= c.deadline) {
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(timeout_).count();
      abort_and_throw("KILN_NCCL_TIMEOUT", where + " did not complete within " + std::to_string(ms) +
                                               " ms; the communicator was aborted (a rank may have stopped, crashed, or called a different collective)");
    }
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(1));
  }
}

void NcclCommunicator::close() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!comm_) return;
  // Destroying waits for collectives in flight; a hung one would hang close(), so abort instead.
  if (in_flight_ > 0) {
    lib_.comm_abort(comm_);
    gone_ = "closed while " + std::to_string(in_flight_) + " collective(s) were in flight (aborted)";
  } else {
    lib_.comm_destroy(comm_);
    gone_ = "closed";
  }
  comm_ = nullptr;
}

}  // namespace kiln
