// N-API face of the shared-memory collectives of the `cpu` sync backend, for
// ranks that are processes on one machine. Rank 0 creates a POSIX shared
// memory segment; every rank maps it. The segment holds two sets of
// (worldSize slots + 1 result area) of chunkBytes each, used by alternate
// chunks of an operand. Per chunk: each rank copies its values into its slot;
// after a barrier, rank r sums slice r of the chunk over the slots in rank
// order ((x0 + x1) + x2 ..., in f32, the same order as the TCP star) into the
// result area; after a second barrier every rank copies the whole result out.
// A set is written again two chunks later, which no rank reaches before every
// rank has passed the next chunk's first barrier, that is, finished copying
// out: two barriers per chunk suffice. The barriers are a counter and a
// generation word in the segment, waited on with futexes; each rank also
// stamps the generation it reached, so a wait that times out names the ranks
// that did not arrive.
//
// Reduce-scatter and all-gather need one barrier per round: a set's slots are
// read only between that round's barrier and the rank's next barrier, and are
// written again two rounds later, after every rank has passed the round in
// between. Reduce-scatter, operand = worldSize chunks of n: round j takes
// p = chunkBytes / 4 / worldSize values at offset j*p of every chunk c into slot
// position c*p; after the barrier rank r sums chunk r's piece over the slots
// in rank order, into its own data (the sums allReduceSum computes, bit for
// bit). All-gather: round j copies up to chunkBytes of this rank's chunk into
// its slot; after the barrier every rank copies out the others' pieces.
#include <napi.h>

#include "worker_job.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>

namespace {

constexpr uint32_t kMagic = 0x6b696c6e;  // "kiln"
constexpr int kMaxRanks = 256;

struct Header {
  uint32_t magic;
  uint32_t worldSize;
  uint64_t chunkBytes;
  alignas(64) std::atomic<uint32_t> arrived;
  alignas(64) std::atomic<uint32_t> generation;
  alignas(64) std::atomic<uint32_t> reached[kMaxRanks];  // the generation each rank has arrived for
};
static_assert(std::atomic<uint32_t>::is_always_lock_free, "futexes need lock-free 32-bit atomics");

constexpr size_t headerBytes() { return (sizeof(Header) + 4095) / 4096 * 4096; }

class Segment {
 public:
  // Rank 0 creates (and sizes) the segment; the others open it.
  Segment(const std::string& name, int rank, int worldSize, size_t chunkBytes, bool create, std::chrono::milliseconds timeout)
      : rank_(rank), worldSize_(worldSize), timeout_(timeout) {
    if (worldSize < 1 || worldSize > kMaxRanks) throw std::runtime_error("shared-memory sync takes 1 to 256 ranks");
    int fd = shm_open(name.c_str(), create ? O_CREAT | O_EXCL | O_RDWR : O_RDWR, 0600);
    if (fd < 0) throw std::runtime_error(std::string("shm_open ") + name + ": " + std::strerror(errno));
    bytes_ = headerBytes() + 2 * (worldSize + 1) * chunkBytes;
    if (create && ftruncate(fd, static_cast<off_t>(bytes_)) != 0) {
      int e = errno;
      close(fd);
      shm_unlink(name.c_str());
      throw std::runtime_error(std::string("sizing shared memory ") + name + " to " + std::to_string(bytes_) + " bytes: " + std::strerror(e));
    }
    struct stat st;
    if (!create && (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != bytes_)) {
      close(fd);
      throw std::runtime_error("shared memory " + name + " has another size than this rank expects (ranks of different runs?)");
    }
    void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) throw std::runtime_error(std::string("mapping shared memory ") + name + ": " + std::strerror(errno));
    base_ = static_cast<char*>(p);
    header_ = reinterpret_cast<Header*>(base_);
    chunkBytes_ = chunkBytes;
    if (create) {
      new (header_) Header();
      header_->worldSize = worldSize;
      header_->chunkBytes = chunkBytes;
      header_->magic = kMagic;
    } else if (header_->magic != kMagic || header_->worldSize != static_cast<uint32_t>(worldSize)) {
      throw std::runtime_error("shared memory " + name + " was not set up for this run");
    }
  }
  ~Segment() { munmap(base_, bytes_); }

  int worldSize() const { return worldSize_; }

  void abort() {
    aborted_.store(true);
    futex(&header_->generation, FUTEX_WAKE, INT32_MAX, nullptr);
  }

  // In place: the f32 sum over the ranks of `n` values, in rank order.
  void allReduceSum(float* data, size_t n) {
    const size_t per = chunkBytes_ / sizeof(float);
    for (size_t at = 0; at < n; at += per) {
      const size_t m = std::min(per, n - at);
      const int set = parity_;
      parity_ ^= 1;
      std::memcpy(slot(set, rank_), data + at, m * sizeof(float));
      barrier();
      const size_t lo = m * rank_ / worldSize_, hi = m * (rank_ + 1) / worldSize_;
      float* result = slot(set, worldSize_);
      std::memcpy(result + lo, slot(set, 0) + lo, (hi - lo) * sizeof(float));
      for (int q = 1; q < worldSize_; q++) {
        const float* x = slot(set, q);
        for (size_t i = lo; i < hi; i++) result[i] += x[i];
      }
      barrier();
      std::memcpy(data + at, result, m * sizeof(float));
    }
  }

  // In place: chunk rank_ of the worldSize chunks of n values at data becomes the f32 sum over the ranks of their chunk rank_, in rank order.
  void reduceScatterSum(float* data, size_t n) {
    const size_t p = chunkBytes_ / sizeof(float) / worldSize_;
    for (size_t at = 0; at < n; at += p) {
      const size_t m = std::min(p, n - at);
      const int set = parity_;
      parity_ ^= 1;
      float* mine = slot(set, rank_);
      for (int c = 0; c < worldSize_; c++) std::memcpy(mine + c * p, data + c * n + at, m * sizeof(float));
      barrier();
      float* result = data + rank_ * n + at;
      const size_t piece = rank_ * p;
      std::memcpy(result, slot(set, 0) + piece, m * sizeof(float));
      for (int q = 1; q < worldSize_; q++) {
        const float* x = slot(set, q) + piece;
        for (size_t i = 0; i < m; i++) result[i] += x[i];
      }
    }
  }

  // In place: chunk r of the worldSize chunks of `bytes` bytes at data becomes rank r's.
  void allGather(char* data, size_t bytes) {
    for (size_t at = 0; at < bytes; at += chunkBytes_) {
      const size_t m = std::min(chunkBytes_, bytes - at);
      const int set = parity_;
      parity_ ^= 1;
      std::memcpy(slotBytes(set, rank_), data + rank_ * bytes + at, m);
      barrier();
      for (int q = 0; q < worldSize_; q++)
        if (q != rank_) std::memcpy(data + q * bytes + at, slotBytes(set, q), m);
    }
  }

  void barrier() {
    Header* h = header_;
    const uint32_t gen = h->generation.load(std::memory_order_acquire);
    h->reached[rank_].store(gen + 1, std::memory_order_release);
    if (h->arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == static_cast<uint32_t>(worldSize_)) {
      h->arrived.store(0, std::memory_order_relaxed);
      h->generation.store(gen + 1, std::memory_order_release);
      futex(&h->generation, FUTEX_WAKE, INT32_MAX, nullptr);
      return;
    }
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    while (h->generation.load(std::memory_order_acquire) == gen) {
      if (aborted_.load()) throw std::runtime_error("aborted");
      if (std::chrono::steady_clock::now() > deadline) {
        std::string missing;
        for (int r = 0; r < worldSize_; r++)
          if (h->reached[r].load() != gen + 1) missing += (missing.empty() ? "" : ",") + std::to_string(r);
        throw std::runtime_error("missing:" + missing);
      }
      timespec slice{0, 20'000'000};  // wake at least every 20 ms to check the deadline and abort
      futex(&h->generation, FUTEX_WAIT, gen, &slice);
    }
  }

 private:
  // Slot i (a rank's, or worldSize: the result) of set 0 or 1.
  char* slotBytes(int set, int i) { return base_ + headerBytes() + (set * (worldSize_ + 1) + i) * chunkBytes_; }
  float* slot(int set, int i) { return reinterpret_cast<float*>(slotBytes(set, i)); }
  static long futex(std::atomic<uint32_t>* word, int op, uint32_t value, timespec* timeout) {
    return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, value, timeout, nullptr, 0);
  }

  int rank_, worldSize_;
  std::chrono::milliseconds timeout_;
  size_t bytes_ = 0, chunkBytes_ = 0;
  char* base_ = nullptr;
  Header* header_ = nullptr;
  std::atomic<bool> aborted_{false};
  int parity_ = 0;  // the set the next chunk uses: the same on every rank, as every rank runs the same chunks
};

class ShmGroup : public Napi::ObjectWrap<ShmGroup> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "ShmGroup",
                       {InstanceMethod("allReduceSum", &ShmGroup::AllReduceSum), InstanceMethod("reduceScatterSum", &ShmGroup::ReduceScatterSum),
                        InstanceMethod("allGather", &ShmGroup::AllGather), InstanceMethod("abort", &ShmGroup::Abort),
                        InstanceMethod("close", &ShmGroup::Close), StaticMethod("unlink", &ShmGroup::Unlink)});
  }

  // new ShmGroup(name, rank, worldSize, chunkBytes, create, timeoutMs)
  explicit ShmGroup(const Napi::CallbackInfo& info) : Napi::ObjectWrap<ShmGroup>(info) {
    try {
      segment_ = std::make_shared<Segment>(info[0].As<Napi::String>().Utf8Value(), info[1].As<Napi::Number>().Int32Value(),
                                           info[2].As<Napi::Number>().Int32Value(), static_cast<size_t>(info[3].As<Napi::Number>().Int64Value()),
                                           info[4].As<Napi::Boolean>().Value(), std::chrono::milliseconds(info[5].As<Napi::Number>().Int64Value()));
    } catch (const std::exception& e) {
      throw Napi::Error::New(info.Env(), e.what());
    }
  }

 private:
  // The segment's name goes once every rank has mapped it; the mappings stay.
  static Napi::Value Unlink(const Napi::CallbackInfo& info) {
    shm_unlink(info[0].As<Napi::String>().Utf8Value().c_str());
    return info.Env().Undefined();
  }

  // allReduceSum(values: Float32Array): in place, on a worker thread.
  Napi::Value AllReduceSum(const Napi::CallbackInfo& info) {
    auto array = info[0].As<Napi::Float32Array>();
    if (!segment_) throw Napi::Error::New(info.Env(), "the shared-memory group was closed");
    float* data = array.Data();
    size_t n = array.ElementLength();
    auto segment = segment_;
    return WorkerJob::start(info.Env(), [segment, data, n] { segment->allReduceSum(data, n); }, array);
  }

  // reduceScatterSum(values: Float32Array, n): in place, chunk `rank` of the values (worldSize chunks of n), on a worker thread.
  Napi::Value ReduceScatterSum(const Napi::CallbackInfo& info) {
    auto array = info[0].As<Napi::Float32Array>();
    const size_t n = static_cast<size_t>(info[1].As<Napi::Number>().Int64Value());
    if (!segment_) throw Napi::Error::New(info.Env(), "the shared-memory group was closed");
    if (n * segment_->worldSize() != array.ElementLength()) throw Napi::RangeError::New(info.Env(), "reduceScatterSum takes worldSize chunks of n values");
    float* data = array.Data();
    auto segment = segment_;
    return WorkerJob::start(info.Env(), [segment, data, n] { segment->reduceScatterSum(data, n); }, array);
  }

  // allGather(bytes: Uint8Array, chunkBytes): in place, every rank's chunk everywhere, on a worker thread.
  Napi::Value AllGather(const Napi::CallbackInfo& info) {
    auto array = info[0].As<Napi::Uint8Array>();
    const size_t bytes = static_cast<size_t>(info[1].As<Napi::Number>().Int64Value());
    if (!segment_) throw Napi::Error::New(info.Env(), "the shared-memory group was closed");
    if (bytes * segment_->worldSize() != array.ByteLength()) throw Napi::RangeError::New(info.Env(), "allGather takes worldSize chunks of chunkBytes bytes");
    char* data = reinterpret_cast<char*>(array.Data());
    auto segment = segment_;
    return WorkerJob::start(info.Env(), [segment, data, bytes] { segment->allGather(data, bytes); }, array);
  }

  // Makes a waiting collective (and every later one) fail at once: another rank failed.
  Napi::Value Abort(const Napi::CallbackInfo& info) {
    if (segment_) segment_->abort();
    return info.Env().Undefined();
  }

  Napi::Value Close(const Napi::CallbackInfo& info) {
    if (segment_) segment_->abort();
    segment_.reset();
    return info.Env().Undefined();
  }

  std::shared_ptr<Segment> segment_;
};

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("ShmGroup", ShmGroup::Define(env));
  return exports;
}

}  // namespace

NODE_API_MODULE(kiln_shm, Init)
