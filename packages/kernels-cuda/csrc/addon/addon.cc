// addon.cc: the Node-API face of the CUDA kernels (and of the simulator, built from
// the same sources). Device addresses cross into JavaScript as doubles (exact below
// 2^53, which covers every x86-64 and CUDA virtual address). download() and
// synchronize() return promises that resolve on a worker thread's wait, so Node's
// event loop never blocks on the device. NCCL's part is in nccl_bindings.cc.
#include <napi.h>

#include <memory>
#include <string>
#include <vector>

#include "../kiln_cuda.h"
#include "../runtime/device.h"
#include "../runtime/raw_runtime.h"
#include "library_probe.h"
#include "nccl_bindings.h"
#if defined(KILN_CUDA_SIM)
#include "../sim/sim_options.h"
#endif

#ifndef KILN_CUDA_ARCHS
#define KILN_CUDA_ARCHS ""
#endif

namespace {

using kiln::Device;
using DevicePtr = std::shared_ptr<Device>;

void* address_of(const Napi::Value& v) { return reinterpret_cast<void*>(static_cast<uintptr_t>(v.As<Napi::Number>().DoubleValue())); }

[[noreturn]] void rethrow(Napi::Env env, const kiln::DeviceFailure& e) {
  Napi::Error err = Napi::Error::New(env, e.what());
  err.Set("code", Napi::String::New(env, e.out_of_memory ? "KILN_OUT_OF_MEMORY" : "KILN_DEVICE_FAILURE"));
  throw err;
}

/** Runs `body`, turning a device failure into a JavaScript error with its code. */
template <typename F>
auto guarded(const Napi::CallbackInfo& info, F&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const kiln::DeviceFailure& e) {
    rethrow(info.Env(), e);
  }
}

struct ByteView {
  void* data;
  size_t bytes;
};

ByteView bytes_of(const Napi::Value& v) {
  if (!v.IsTypedArray()) throw Napi::TypeError::New(v.Env(), "expected a typed array");
  auto ta = v.As<Napi::TypedArray>();
  auto* base = static_cast<uint8_t*>(ta.ArrayBuffer().Data());
  return {base + ta.ByteOffset(), ta.ByteLength()};
}

/** Waits for a device event off the main thread, then runs `finish` there too. */
class DeviceWait : public Napi::AsyncWorker {
 public:
  DeviceWait(Napi::Env env, DevicePtr device, std::function<void()> wait)
      : Napi::AsyncWorker(env), device_(std::move(device)), wait_(std::move(wait)), deferred_(Napi::Promise::Deferred::New(env)) {}
  Napi::Promise promise() { return deferred_.Promise(); }
  void keep_alive(const Napi::Value& v) { held_ = Napi::Persistent(v.As<Napi::Object>()); }
  /** Keeps `v` alive until the wait is done and resolves the promise with it. */
  void resolve_with(const Napi::Value& v) {
    keep_alive(v);
    resolve_held_ = true;
  }
  void Execute() override {
    try {
      wait_();
    } catch (const std::exception& e) {
      SetError(e.what());
    }
  }
  void OnOK() override { deferred_.Resolve(resolve_held_ ? held_.Value() : Env().Undefined()); }
  void OnError(const Napi::Error& e) override { deferred_.Reject(e.Value()); }

 private:
  DevicePtr device_;
  std::function<void()> wait_;
  Napi::Promise::Deferred deferred_;
  Napi::ObjectReference held_;
  bool resolve_held_ = false;
};

class DeviceHandle : public Napi::ObjectWrap<DeviceHandle> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "Device",
                       {InstanceMethod("properties", &DeviceHandle::Properties), InstanceMethod("alloc", &DeviceHandle::Alloc),
                        InstanceMethod("free", &DeviceHandle::Free), InstanceMethod("upload", &DeviceHandle::Upload),
                        InstanceMethod("download", &DeviceHandle::Download), InstanceMethod("copy", &DeviceHandle::Copy),
                        InstanceMethod("launch", &DeviceHandle::Launch), InstanceMethod("synchronize", &DeviceHandle::Synchronize),
                        InstanceMethod("scratchBytes", &DeviceHandle::ScratchBytes), InstanceMethod("reserveScratch", &DeviceHandle::ReserveScratch),
                        InstanceMethod("scratchReserved", &DeviceHandle::ScratchReserved),
                        InstanceMethod("allocatorStats", &DeviceHandle::AllocatorStats), InstanceMethod("emptyCache", &DeviceHandle::EmptyCache),
                        InstanceMethod("freeBytes", &DeviceHandle::FreeBytes), InstanceMethod("close", &DeviceHandle::Close),
                        InstanceMethod("useCublasLt", &DeviceHandle::UseCublasLt), InstanceMethod("openNccl", &DeviceHandle::OpenNccl),
                        InstanceMethod("mark", &DeviceHandle::Mark), InstanceMethod("readMarks", &DeviceHandle::ReadMarks),
                        InstanceMethod("beginGraph", &DeviceHandle::BeginGraph), InstanceMethod("endGraph", &DeviceHandle::EndGraph),
                        InstanceMethod("launchGraph", &DeviceHandle::LaunchGraph), InstanceMethod("dropGraph", &DeviceHandle::DropGraph)});
  }

  explicit DeviceHandle(const Napi::CallbackInfo& info) : Napi::ObjectWrap<DeviceHandle>(info) {
    int ordinal = info.Length() > 0 ? info[0].As<Napi::Number>().Int32Value() : 0;
    guarded(info, [&] {
      device_ = std::make_shared<Device>(ordinal);
    });
  }

 private:
  Device& dev(const Napi::CallbackInfo& info) {
    if (!device_) throw Napi::Error::New(info.Env(), "this CUDA device was closed");
    return *device_;
  }

  Napi::Value Properties(const Napi::CallbackInfo& info) {
    const auto& p = dev(info).properties();
    auto o = Napi::Object::New(info.Env());
    o.Set("name", p.name);
    o.Set("totalBytes", static_cast<double>(p.total_bytes));
    o.Set("freeBytesAtOpen", static_cast<double>(p.free_bytes));
    o.Set("computeCapability", std::to_string(p.major) + "." + std::to_string(p.minor));
    o.Set("multiprocessors", p.multiprocessors);
    o.Set("sharedMemoryPerBlock", static_cast<double>(p.shared_memory_per_block_optin));
    return o;
  }

  Napi::Value Alloc(const Napi::CallbackInfo& info) {
    auto bytes = static_cast<size_t>(info[0].As<Napi::Number>().DoubleValue());
    return guarded(info, [&] {
      return Napi::Number::New(info.Env(), static_cast<double>(reinterpret_cast<uintptr_t>(dev(info).alloc(bytes))));
    });
  }

  void Free(const Napi::CallbackInfo& info) {
    guarded(info, [&] {
      dev(info).free(address_of(info[0]));
    });
  }

  void Upload(const Napi::CallbackInfo& info) {
    ByteView src = bytes_of(info[1]);
    guarded(info, [&] {
      dev(info).upload(address_of(info[0]), src.data, src.bytes);
    });
  }

  Napi::Value Download(const Napi::CallbackInfo& info) {
    ByteView out = bytes_of(info[1]);
    return guarded(info, [&] {
      auto pending = std::make_shared<kiln::PendingDownload>(dev(info).begin_download(address_of(info[0]), out.bytes));
      DevicePtr d = device_;
      auto* work = new DeviceWait(info.Env(), d, [d, pending, out]() { d->finish_download(*pending, out.data); });
      work->keep_alive(info[1]);
      Napi::Promise promise = work->promise();
      work->Queue();
      return promise;
    });
  }

  void Copy(const Napi::CallbackInfo& info) {
    guarded(info, [&] {
      dev(info).copy(address_of(info[0]), address_of(info[1]), static_cast<size_t>(info[2].As<Napi::Number>().DoubleValue()));
    });
  }

  Napi::Value UseCublasLt(const Napi::CallbackInfo& info) {
    std::string path = info[0].As<Napi::String>().Utf8Value();
    bool tf32 = info.Length() > 1 && info[1].ToBoolean().Value();
    return guarded(info, [&] {
      return Napi::String::New(info.Env(), dev(info).use_cublaslt(path, tf32));
    });
  }

  /** openNccl(libraryPath, uniqueId, rank, worldSize, timeoutMs) -> Promise of a communicator (nccl_bindings.h). */
  Napi::Value OpenNccl(const Napi::CallbackInfo& info) {
    dev(info);
    return kiln::addon::open_nccl(info, device_);
  }

  void Launch(const Napi::CallbackInfo& info) {
    std::string name = info[0].As<Napi::String>().Utf8Value();
    auto values = info[1].As<Napi::Float64Array>();
    guarded(info, [&] {
      dev(info).launch(name, values.Data(), static_cast<int>(values.ElementLength()));
    });
  }

  /** scratchBytes(name, values): the scratch a launch with these values would ask for (nothing runs). */
  Napi::Value ScratchBytes(const Napi::CallbackInfo& info) {
    std::string name = info[0].As<Napi::String>().Utf8Value();
    auto values = info[1].As<Napi::Float64Array>();
    return guarded(info, [&] {
      return Napi::Number::New(info.Env(), static_cast<double>(dev(info).scratch_bytes(name, values.Data(), static_cast<int>(values.ElementLength()))));
    });
  }

  void ReserveScratch(const Napi::CallbackInfo& info) {
    auto bytes = static_cast<size_t>(info[0].As<Napi::Number>().DoubleValue());
    guarded(info, [&] {
      dev(info).reserve_scratch(bytes);
    });
  }

  Napi::Value ScratchReserved(const Napi::CallbackInfo& info) {
    return Napi::Number::New(info.Env(), static_cast<double>(dev(info).scratch_reserved()));
  }

  void BeginGraph(const Napi::CallbackInfo& info) {
    guarded(info, [&] {
      dev(info).begin_graph();
    });
  }

  Napi::Value EndGraph(const Napi::CallbackInfo& info) {
    return guarded(info, [&] {
      return Napi::Number::New(info.Env(), dev(info).end_graph());
    });
  }

  /** launchGraph(id) -> false when the graph is stale (nothing ran: record it again). */
  Napi::Value LaunchGraph(const Napi::CallbackInfo& info) {
    return guarded(info, [&] {
      return Napi::Boolean::New(info.Env(), dev(info).launch_graph(info[0].As<Napi::Number>().Int32Value()));
    });
  }

  void DropGraph(const Napi::CallbackInfo& info) { dev(info).drop_graph(info[0].As<Napi::Number>().Int32Value()); }

  void Mark(const Napi::CallbackInfo& info) {
    guarded(info, [&] {
      dev(info).mark();
    });
  }

  /** readMarks() -> Promise<Float64Array>: once the marks enqueued since the last read are done, each one's ms after the first. */
  Napi::Value ReadMarks(const Napi::CallbackInfo& info) {
    auto marks = std::make_shared<std::vector<kiln::RawEvent>>(dev(info).take_marks());
    auto out = Napi::Float64Array::New(info.Env(), marks->size());
    DevicePtr d = device_;
    double* ms = out.Data();
    auto* work = new DeviceWait(info.Env(), d, [d, marks, ms]() { d->read_marks(*marks, ms); });
    work->resolve_with(out);
    Napi::Promise promise = work->promise();
    work->Queue();
    return promise;
  }

  Napi::Value Synchronize(const Napi::CallbackInfo& info) {
    return guarded(info, [&] {
      kiln::RawEvent e = dev(info).fence();
      auto* work = new DeviceWait(info.Env(), device_, [e]() {
        kiln::raw_event_wait(e);
        kiln::raw_event_destroy(e);
      });
      Napi::Promise promise = work->promise();
      work->Queue();
      return promise;
    });
  }

  Napi::Value AllocatorStats(const Napi::CallbackInfo& info) {
    auto s = dev(info).allocator_stats();
    auto o = Napi::Object::New(info.Env());
    o.Set("allocatedBytes", static_cast<double>(s.allocated_bytes));
    o.Set("reservedBytes", static_cast<double>(s.reserved_bytes));
    o.Set("peakReservedBytes", static_cast<double>(s.peak_reserved_bytes));
    o.Set("deviceAllocations", static_cast<double>(s.device_allocations));
    o.Set("cacheHits", static_cast<double>(s.cache_hits));
    o.Set("liveBlocks", static_cast<double>(s.live_blocks));
    return o;
  }

  void EmptyCache(const Napi::CallbackInfo& info) {
    guarded(info, [&] {
      dev(info).empty_cache();
    });
  }

  Napi::Value FreeBytes(const Napi::CallbackInfo& info) {
    return guarded(info, [&] {
      return Napi::Number::New(info.Env(), static_cast<double>(dev(info).free_bytes()));
    });
  }

  void Close(const Napi::CallbackInfo&) { device_.reset(); }

  DevicePtr device_;
};

Napi::Value Status(const Napi::CallbackInfo& info) {
  kiln::RuntimeStatus st = kiln::raw_status();
  auto o = Napi::Object::New(info.Env());
  o.Set("simulated", st.simulated);
  o.Set("driverVersion", st.driver_version);
  o.Set("runtimeVersion", st.runtime_version);
  o.Set("deviceCount", st.device_count);
  o.Set("error", st.error);
  o.Set("archs", KILN_CUDA_ARCHS);
  auto names = Napi::Array::New(info.Env());
  uint32_t i = 0;
  for (const auto& n : kiln::kernel_names()) names.Set(i++, n);
  o.Set("kernels", names);
  return o;
}

/** libraryVersion(path, "cublasLt" | "nccl") -> "13.0.2", or throws with why it could not be read. */
Napi::Value LibraryVersion(const Napi::CallbackInfo& info) {
  kiln::LibraryVersion v = kiln::probe_library_version(info[0].As<Napi::String>().Utf8Value(), info[1].As<Napi::String>().Utf8Value());
  if (!v.ok) throw Napi::Error::New(info.Env(), v.error);
  return Napi::String::New(info.Env(), std::to_string(v.major) + "." + std::to_string(v.minor) + "." + std::to_string(v.patch));
}

#if defined(KILN_CUDA_SIM)
void SetSimOptions(const Napi::CallbackInfo& info) {
  auto o = info[0].As<Napi::Object>();
  kiln_sim::SimOptions opts;
  opts.reverse_blocks = o.Get("reverseBlocks").ToBoolean();
  opts.reverse_threads = o.Get("reverseThreads").ToBoolean();
  opts.warps_in_turn = o.Has("warpsInTurn") && o.Get("warpsInTurn").ToBoolean();
  if (o.Has("maxGridY") && o.Get("maxGridY").IsNumber()) {
    const int64_t y = o.Get("maxGridY").As<Napi::Number>().Int64Value();
    if (y < 1 || y > 65535) throw Napi::RangeError::New(info.Env(), "maxGridY must be between 1 and 65535");
    opts.max_grid_y = static_cast<unsigned>(y);
  }
  kiln_sim::set_options(opts);
}
#endif

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("status", Napi::Function::New(env, Status));
  exports.Set("Device", DeviceHandle::Define(env));
  exports.Set("libraryVersion", Napi::Function::New(env, LibraryVersion));
  kiln::addon::register_nccl(env, exports);
#if defined(KILN_CUDA_SIM)
  exports.Set("setSimOptions", Napi::Function::New(env, SetSimOptions));
#endif
  return exports;
}

}  // namespace

NODE_API_MODULE(kiln_cuda, Init)
