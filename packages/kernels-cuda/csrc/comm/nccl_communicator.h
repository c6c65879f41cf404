// nccl_communicator.h: one rank's NCCL communicator on one opened device.
//
// Collectives run on the communicator's own stream, ordered against the device's
// compute stream with events, so kernels and collectives overlap only where the
// data allows:
//
//   compute: ... kernels that write x ... [ready] ......... wait(done) ... kernels that read x
//   comm:                                 wait(ready) ncclAllReduce(x) [done]
//
// The host never blocks on a collective: wait() (called off the main thread) polls
// the done event and ncclCommGetAsyncError until the collective completes, NCCL
// reports an error, or the timeout passes; the last two abort the communicator
// (ncclCommAbort), after which every call fails with the reason.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "../runtime/device.h"
#include "nccl_library.h"

namespace kiln {

/** A collective enqueued on the communicator's stream; its done event is destroyed with it. */
struct PendingCollective {
  PendingCollective() = default;
  PendingCollective(const PendingCollective&) = delete;
  PendingCollective& operator=(const PendingCollective&) = delete;
  ~PendingCollective();
  RawEvent done = nullptr;
  std::chrono::steady_clock::time_point deadline;
  std::string what;  // "allReduce of 1024 f32 (sum)"
};

class NcclCommunicator {
 public:
  /**
   * Joins the communicator `id` as `rank` of `world_size` (ncclCommInitRank): blocks
   * until every rank has joined, so call it off the main thread. Throws NcclFailure.
   */
  NcclCommunicator(const NcclLibrary& lib, std::shared_ptr<Device> device, const nccl::UniqueId& id, int rank, int world_size, double timeout_ms);
  ~NcclCommunicator();
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  /** In-place all-reduce of `count` elements at `data` (dtype: kiln_cuda.h's kF32/kBF16/kF16); mean = sum / world size. */
  std::shared_ptr<PendingCollective> all_reduce(void* data, size_t count, int dtype, bool mean);
  /** In-place broadcast of `bytes` bytes at `data` from rank `root`. */
  std::shared_ptr<PendingCollective> broadcast(void* data, size_t bytes, int root);
  /**
   * In-place reduce-scatter: `data` holds world-size chunks of `count` elements; this
   * rank's chunk (number `rank`) becomes the sum (or mean) over the ranks of theirs.
   */
  std::shared_ptr<PendingCollective> reduce_scatter(void* data, size_t count, int dtype, bool mean);
  /** In-place all-gather: `data` holds world-size chunks of `bytes` bytes; chunk r becomes rank r's on every rank. */
  std::shared_ptr<PendingCollective> all_gather(void* data, size_t bytes);
  /** Blocks the calling thread until `c` completes; throws NcclFailure on an NCCL error or the timeout (after aborting). */
  void wait(const PendingCollective& c);
  /** Destroys the communicator (aborts it when collectives are still in flight); later calls fail. */
  void close();

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }

 private:
  template <typename Enqueue>
  std::shared_ptr<PendingCollective> enqueue(const std::string& what, Enqueue call);
  [[noreturn]] void abort_and_throw(const std::string& code, const std::string& why);
  void check_usable() const;  // mu_ held

  const NcclLibrary& lib_;
  std::shared_ptr<Device> device_;
  int rank_, world_size_;
  std::chrono::steady_clock::duration timeout_;
  RawStream stream_ = nullptr;
  std::mutex mu_;
  nccl::CommHandle comm_ = nullptr;  // null once closed or aborted
  std::string gone_;                 // why comm_ is null
  int in_flight_ = 0;                // collectives enqueued and not yet waited for
};

}  // namespace kiln
