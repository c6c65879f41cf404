// A promise whose work runs on a libuv worker thread: resolves when the work
// returns, rejects with its exception's message. `keep` (the JS buffer the
// work reads or writes, if any) stays alive until then.
#pragma once
#include <napi.h>

#include <exception>
#include <functional>
#include <utility>

class WorkerJob : public Napi::AsyncWorker {
 public:
  WorkerJob(Napi::Env env, std::function<void()> work, Napi::Value keep = Napi::Value())
      : Napi::AsyncWorker(env), deferred_(Napi::Promise::Deferred::New(env)), work_(std::move(work)) {
    if (!keep.IsEmpty() && keep.IsObject()) keep_ = Napi::Persistent(keep.As<Napi::Object>());
  }

  // Queues the work and returns its promise.
  static Napi::Promise start(Napi::Env env, std::function<void()> work, Napi::Value keep = Napi::Value()) {
    auto* job = new WorkerJob(env, std::move(work), keep);
    job->Queue();
    return job->deferred_.Promise();
  }

  void Execute() override {
    try {
      work_();
    } catch (const std::exception& e) {
      SetError(e.what());
    }
  }
  void OnOK() override { deferred_.Resolve(Env().Undefined()); }
  void OnError(const Napi::Error& e) override { deferred_.Reject(e.Value()); }

 private:
  Napi::Promise::Deferred deferred_;
  std::function<void()> work_;
  Napi::ObjectReference keep_;
};
