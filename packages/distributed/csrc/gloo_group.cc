// N-API face of Gloo for the `gloo` sync backend: one full mesh of TCP pairs
// per process, connected from addresses the ranks exchange through kiln's own
// rendezvous (rank 0's star group), and the collectives the trainer needs on
// host buffers. Every collective runs on a libuv worker thread, so
// Node's event loop (and with it the star group that watches the other
// ranks) keeps running while Gloo waits on the network.
#include <napi.h>

#include "ring_reduce_scatter.h"
#include "worker_job.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/context.h>
#include <gloo/transport/tcp/device.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace {

// A gloo::Context whose pairs are created and connected in two steps, so the
// addresses can travel through any channel between the steps.
class MeshContext : public gloo::Context {
 public:
  MeshContext(int rank, int size, std::shared_ptr<gloo::transport::Device> device, std::chrono::milliseconds timeout)
      : gloo::Context(rank, size) {
    device_ = std::move(device);
    transportContext_ = device_->createContext(rank, size);
    transportContext_->setTimeout(timeout);
    timeout_ = timeout;
  }
  std::vector<char> listen(int peer) { return transportContext_->createPair(peer)->address().bytes(); }
  void connect(int peer, const std::vector<char>& address) { transportContext_->getPair(peer)->connect(address); }
};

template <typename T>
void addInto(void* out, const void* a, const void* b, size_t n) {
  auto* o = static_cast<T*>(out);
  auto* x = static_cast<const T*>(a);
  auto* y = static_cast<const T*>(b);
  for (size_t i = 0; i < n; i++) o[i] = x[i] + y[i];
}

class GlooGroup : public Napi::ObjectWrap<GlooGroup> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "GlooGroup",
                       {InstanceMethod("addresses", &GlooGroup::Addresses), InstanceMethod("connect", &GlooGroup::Connect),
                        InstanceMethod("allReduceSum", &GlooGroup::AllReduceSum), InstanceMethod("broadcast", &GlooGroup::Broadcast),
                        InstanceMethod("reduceScatterSum", &GlooGroup::ReduceScatterSum), InstanceMethod("allGather", &GlooGroup::AllGather),
                        InstanceMethod("barrier", &GlooGroup::Barrier), InstanceMethod("close", &GlooGroup::Close)});
  }

  // new GlooGroup(rank, size, { hostname?, iface? }, timeoutMs)
  explicit GlooGroup(const Napi::CallbackInfo& info) : Napi::ObjectWrap<GlooGroup>(info) {
    rank_ = info[0].As<Napi::Number>().Int32Value();
    size_ = info[1].As<Napi::Number>().Int32Value();
    auto where = info[2].As<Napi::Object>();
    timeout_ = std::chrono::milliseconds(info[3].As<Napi::Number>().Int64Value());
    gloo::transport::tcp::attr attr;
    if (where.Has("iface")) attr.iface = where.Get("iface").As<Napi::String>().Utf8Value();
    else attr.hostname = where.Get("hostname").As<Napi::String>().Utf8Value();
    try {
      context_ = std::make_shared<MeshContext>(rank_, size_, gloo::transport::tcp::CreateDevice(attr), timeout_);
      for (int peer = 0; peer < size_; peer++) addresses_.push_back(peer == rank_ ? std::vector<char>() : context_->listen(peer));
    } catch (const std::exception& e) {
      throw Napi::Error::New(info.Env(), e.what());
    }
  }

 private:
  // This rank's listening address for each peer, as one buffer: per rank, a u32 length then the bytes.
  Napi::Value Addresses(const Napi::CallbackInfo& info) {
    std::vector<char> out;
    for (const auto& a : addresses_) {
      uint32_t n = static_cast<uint32_t>(a.size());
      out.insert(out.end(), reinterpret_cast<char*>(&n), reinterpret_cast<char*>(&n) + 4);
      out.insert(out.end(), a.begin(), a.end());
    }
    return Napi::Buffer<char>::Copy(info.Env(), out.data(), out.size());
  }

  // connect(everyRanksAddresses: Uint8Array[]): every rank's addresses() result, by rank.
  Napi::Value Connect(const Napi::CallbackInfo& info) {
    auto all = info[0].As<Napi::Array>();
    std::vector<std::vector<char>> mine(size_);  // the address each peer opened for this rank
    for (int peer = 0; peer < size_; peer++) {
      if (peer == rank_) continue;
      auto buf = all.Get(peer).As<Napi::Uint8Array>();
      const char* p = reinterpret_cast<const char*>(buf.Data());
      size_t at = 0;
      for (int r = 0; r <= rank_; r++) {
        uint32_t n;
        if (at + 4 > buf.ByteLength()) throw Napi::Error::New(info.Env(), "rank " + std::to_string(peer) + " sent a malformed address list");
        std::memcpy(&n, p + at, 4);
        at += 4;
        if (at + n > buf.ByteLength()) throw Napi::Error::New(info.Env(), "rank " + std::to_string(peer) + " sent a malformed address list");
        if (r == rank_) mine[peer].assign(p + at, p + at + n);
        at += n;
      }
    }
    auto context = context_;
    int rank = rank_, size = size_;
    return WorkerJob::start(info.Env(), [context, mine, rank, size] {
      for (int peer = 0; peer < size; peer++) if (peer != rank) context->connect(peer, mine[peer]);
    });
  }

  // allReduceSum(values: Float32Array | Float64Array): in place, the sum over the ranks (ring algorithm: the same bits on every rank).
  Napi::Value AllReduceSum(const Napi::CallbackInfo& info) {
    auto array = info[0].As<Napi::TypedArray>();
    void* data = static_cast<char*>(array.ArrayBuffer().Data()) + array.ByteOffset();
    size_t n = array.ElementLength();
    bool f64 = array.TypedArrayType() == napi_float64_array;
    if (!f64 && array.TypedArrayType() != napi_float32_array) throw Napi::TypeError::New(info.Env(), "allReduceSum takes a Float32Array or a Float64Array");
    auto context = live(info.Env());
    auto timeout = timeout_;
    uint32_t tag = nextTag_++;
    return WorkerJob::start(info.Env(), [context, data, n, f64, timeout, tag] {
      gloo::AllreduceOptions o(context);
      if (f64) o.setOutput(static_cast<double*>(data), n), o.setReduceFunction(&addInto<double>);
      else o.setOutput(static_cast<float*>(data), n), o.setReduceFunction(&addInto<float>);
      o.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
      o.setTag(tag);
      o.setTimeout(timeout);
      gloo::allreduce(o);
    }, info[0]);
  }

  // broadcast(bytes: Uint8Array, root): in place, root's bytes on every rank.
  Napi::Value Broadcast(const Napi::CallbackInfo& info) {
    auto bytes = info[0].As<Napi::Uint8Array>();
    int root = info[1].As<Napi::Number>().Int32Value();
    uint8_t* data = bytes.Data();
    size_t n = bytes.ByteLength();
    auto context = live(info.Env());
    auto timeout = timeout_;
    uint32_t tag = nextTag_++;
    return WorkerJob::start(info.Env(), [context, data, n, root, timeout, tag] {
      gloo::BroadcastOptions o(context);
      o.setOutput(data, n);
      o.setRoot(root);
      o.setTag(tag);
      o.setTimeout(timeout);
      gloo::broadcast(o);
    }, info[0]);
  }

  // reduceScatterSum(values: Float32Array, n): in place, chunk `rank` of the values (size chunks of n) becomes the ranks' sum of it.
  Napi::Value ReduceScatterSum(const Napi::CallbackInfo& info) {
    auto values = info[0].As<Napi::Float32Array>();
    const size_t n = static_cast<size_t>(info[1].As<Napi::Number>().Int64Value());
    if (n * size_ != values.ElementLength()) throw Napi::RangeError::New(info.Env(), "reduceScatterSum takes size chunks of n values");
    float* data = values.Data();
    auto context = live(info.Env());
    auto timeout = timeout_;
    uint32_t tag = nextTag_++;
    return WorkerJob::start(info.Env(), [context, data, n, timeout, tag] { kiln::ringReduceScatterSum(context, data, n, tag, timeout); }, info[0]);
  }

  // allGather(bytes: Uint8Array, chunkBytes): in place, chunk r (of size chunks) becomes rank r's on every rank.
  Napi::Value AllGather(const Napi::CallbackInfo& info) {
    auto bytes = info[0].As<Napi::Uint8Array>();
    const size_t chunk = static_cast<size_t>(info[1].As<Napi::Number>().Int64Value());
    if (chunk * size_ != bytes.ByteLength()) throw Napi::RangeError::New(info.Env(), "allGather takes size chunks of chunkBytes bytes");
    uint8_t* data = bytes.Data();
    auto context = live(info.Env());
    auto timeout = timeout_;
    uint32_t tag = nextTag_++;
    int size = size_;
    return WorkerJob::start(info.Env(), [context, data, chunk, size, timeout, tag] {
      if (size == 1 || chunk == 0) return;
      gloo::AllgatherOptions o(context);
      o.setOutput(data, chunk * size);
      o.setTag(tag);
      o.setTimeout(timeout);
      gloo::allgather(o);
    }, info[0]);
  }

  Napi::Value Barrier(const Napi::CallbackInfo& info) {
    auto context = live(info.Env());
    auto timeout = timeout_;
    uint32_t tag = nextTag_++;
    return WorkerJob::start(info.Env(), [context, timeout, tag] {
      gloo::BarrierOptions o(context);
      o.setTag(tag);
      o.setTimeout(timeout);
      gloo::barrier(o);
    });
  }

  // Drops this handle on the context; the pairs close once no collective still runs on them.
  Napi::Value Close(const Napi::CallbackInfo& info) {
    context_.reset();
    return info.Env().Undefined();
  }

  std::shared_ptr<MeshContext> live(Napi::Env env) {
    if (!context_) throw Napi::Error::New(env, "the Gloo group was closed");
    return context_;
  }

  int rank_ = 0, size_ = 1;
  uint32_t nextTag_ = 1;
  std::chrono::milliseconds timeout_{0};
  std::shared_ptr<MeshContext> context_;
  std::vector<std::vector<char>> addresses_;
};

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("GlooGroup", GlooGroup::Define(env));
  return exports;
}

}  // namespace

NODE_API_MODULE(kiln_gloo, Init)
