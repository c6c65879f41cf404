// nccl_bindings.cc: joining a communicator and waiting for collectives happen on
// libuv's worker threads (Napi::AsyncWorker), so Node's event loop never blocks on
// NCCL or the device; errors carry a code (KILN_NCCL_MISSING, _TOO_OLD, _SYMBOL,
// _ERROR, _TIMEOUT, or KILN_DEVICE_FAILURE) that src/nccl.ts turns into advice.
#include "nccl_bindings.h"

#include <cstring>
#include <functional>
#include <string>

#include "../comm/nccl_communicator.h"
#include "../comm/nccl_library.h"

namespace kiln::addon {
namespace {

using CommPtr = std::shared_ptr<NcclCommunicator>;

Napi::Error coded_error(Napi::Env env, const std::string& code, const std::string& message) {
  Napi::Error err = Napi::Error::New(env, message);
  err.Set("code", Napi::String::New(env, code));
  return err;
}

/** Runs `body`, turning kiln's C++ failures into JavaScript errors with their code. */
template <typename Body>
auto guarded(Napi::Env env, Body body) -> decltype(body()) {
  try {
    return body();
  } catch (const NcclFailure& e) {
    throw coded_error(env, e.code, e.what());
  } catch (const DeviceFailure& e) {
    throw coded_error(env, "KILN_DEVICE_FAILURE", e.what());
  }
}

/** Runs `work` on a worker thread; the promise resolves with `result()` (made on the main thread) or rejects with the coded error. */
class NcclWork : public Napi::AsyncWorker {
 public:
  NcclWork(Napi::Env env, std::function<void()> work, std::function<Napi::Value(Napi::Env)> result)
      : Napi::AsyncWorker(env), work_(std::move(work)), result_(std::move(result)), deferred_(Napi::Promise::Deferred::New(env)) {}
  Napi::Promise promise() { return deferred_.Promise(); }
  void Execute() override {
    try {
      work_();
    } catch (const NcclFailure& e) {
      code_ = e.code;
      SetError(e.what());
    } catch (const DeviceFailure& e) {
      code_ = "KILN_DEVICE_FAILURE";
      SetError(e.what());
    } catch (const std::exception& e) {
      code_ = "KILN_NCCL_ERROR";
      SetError(e.what());
    }
  }
  void OnOK() override { deferred_.Resolve(result_ ? result_(Env()) : Env().Undefined()); }
  void OnError(const Napi::Error& e) override { deferred_.Reject(coded_error(Env(), code_, e.Message()).Value()); }

 private:
  std::function<void()> work_;
  std::function<Napi::Value(Napi::Env)> result_;
  Napi::Promise::Deferred deferred_;
  std::string code_;
};

void* address_of(const Napi::Value& v) { return reinterpret_cast<void*>(static_cast<uintptr_t>(v.As<Napi::Number>().DoubleValue())); }
size_t size_of(const Napi::Value& v) { return static_cast<size_t>(v.As<Napi::Number>().DoubleValue()); }

/** A promise for `pending`: resolved once the collective is done, rejected (after an abort) on an NCCL error or the timeout. */
Napi::Value wait_for(Napi::Env env, CommPtr comm, std::shared_ptr<PendingCollective> pending) {
  auto* work = new NcclWork(env, [comm, pending]() { comm->wait(*pending); }, nullptr);
  Napi::Promise promise = work->promise();
  work->Queue();
  return promise;
}

Napi::Object communicator_object(Napi::Env env, CommPtr comm) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("allReduce", Napi::Function::New(env, [comm](const Napi::CallbackInfo& info) -> Napi::Value {
          Napi::Env env = info.Env();
          auto pending = guarded(env, [&] {
            return comm->all_reduce(address_of(info[0]), size_of(info[1]), info[2].As<Napi::Number>().Int32Value(), info[3].ToBoolean().Value());
          });
          return wait_for(env, comm, pending);
        }));
  o.Set("broadcast", Napi::Function::New(env, [comm](const Napi::CallbackInfo& info) -> Napi::Value {
          Napi::Env env = info.Env();
          auto pending = guarded(env, [&] { return comm->broadcast(address_of(info[0]), size_of(info[1]), info[2].As<Napi::Number>().Int32Value()); });
          return wait_for(env, comm, pending);
        }));
  o.Set("reduceScatter", Napi::Function::New(env, [comm](const Napi::CallbackInfo& info) -> Napi::Value {
          Napi::Env env = info.Env();
          auto pending = guarded(env, [&] {
            return comm->reduce_scatter(address_of(info[0]), size_of(info[1]), info[2].As<Napi::Number>().Int32Value(), info[3].ToBoolean().Value());
          });
          return wait_for(env, comm, pending);
        }));
  o.Set("allGather", Napi::Function::New(env, [comm](const Napi::CallbackInfo& info) -> Napi::Value {
          Napi::Env env = info.Env();
          auto pending = guarded(env, [&] { return comm->all_gather(address_of(info[0]), size_of(info[1])); });
          return wait_for(env, comm, pending);
        }));
  o.Set("close", Napi::Function::New(env, [comm](const Napi::CallbackInfo& info) { guarded(info.Env(), [&] { comm->close(); }); }));
  return o;
}

Napi::Value NcclLibraryInfo(const Napi::CallbackInfo& info) {
  std::string path = info[0].As<Napi::String>().Utf8Value();
  const NcclLibrary& lib = guarded(info.Env(), [&]() -> const NcclLibrary& { return load_nccl(path); });
  Napi::Object o = Napi::Object::New(info.Env());
  o.Set("path", lib.path);
  o.Set("version", lib.version);
  return o;
}

Napi::Value NcclUniqueId(const Napi::CallbackInfo& info) {
  std::string path = info[0].As<Napi::String>().Utf8Value();
  nccl::UniqueId id{};
  guarded(info.Env(), [&] {
    const NcclLibrary& lib = load_nccl(path);
    nccl::Result r = lib.get_unique_id(&id);
    if (r != nccl::kSuccess) throw NcclFailure("KILN_NCCL_ERROR", "ncclGetUniqueId failed: " + lib.describe(r));
  });
  auto out = Napi::Uint8Array::New(info.Env(), nccl::kUniqueIdBytes);
  std::memcpy(out.Data(), id.internal, nccl::kUniqueIdBytes);
  return out;
}

}  // namespace

void register_nccl(Napi::Env env, Napi::Object exports) {
  exports.Set("ncclLibrary", Napi::Function::New(env, NcclLibraryInfo));
  exports.Set("ncclUniqueId", Napi::Function::New(env, NcclUniqueId));
}

Napi::Value open_nccl(const Napi::CallbackInfo& info, std::shared_ptr<Device> device) {
  Napi::Env env = info.Env();
  std::string path = info[0].As<Napi::String>().Utf8Value();
  auto bytes = info[1].As<Napi::Uint8Array>();
  if (bytes.ByteLength() != nccl::kUniqueIdBytes) {
    throw coded_error(env, "KILN_NCCL_ERROR", "an NCCL unique id is " + std::to_string(nccl::kUniqueIdBytes) + " bytes, not " + std::to_string(bytes.ByteLength()));
  }
  nccl::UniqueId id{};
  std::memcpy(id.internal, bytes.Data(), nccl::kUniqueIdBytes);
  int rank = info[2].As<Napi::Number>().Int32Value();
  int world_size = info[3].As<Napi::Number>().Int32Value();
  double timeout_ms = info[4].As<Napi::Number>().DoubleValue();
  const NcclLibrary& lib = guarded(env, [&]() -> const NcclLibrary& { return load_nccl(path); });
  auto made = std::make_shared<CommPtr>();
  const NcclLibrary* lib_ptr = &lib;  // loaded for the life of the process
  auto* work = new NcclWork(
      env,
      [made, lib_ptr, device, id, rank, world_size, timeout_ms]() {
        *made = std::make_shared<NcclCommunicator>(*lib_ptr, device, id, rank, world_size, timeout_ms);
      },
      [made](Napi::Env env) -> Napi::Value { return communicator_object(env, *made); });
  Napi::Promise promise = work->promise();
  work->Queue();
  return promise;
}

}  // namespace kiln::addon
