// addon.cc: the Node-API face of the native kernels of @kiln/kernels-wasm. They run on
// the WebAssembly memory itself: JavaScript passes a typed array over the memory's
// SharedArrayBuffer and byte offsets into it, nothing is copied. The base pointer and
// length are read from that view on every call, so a memory that grew (a new buffer)
// is seen as soon as the caller passes a view of the new buffer.
//
//   isas()             the instruction sets this CPU runs, best first: ["avx512", "avx2"],
//                      or ["neon"] on arm64
//   arch               process.arch's view of the build: "x64", "arm64", or "other" (no kernels)
//   kernels(isa)       the calling thread's buffers allocated, and
//                      { isa, mr, nr, kc, ceilingFlopsPerIteration,
//                        matmul(view, argsPtr, part, parts, dtype),  one part of a matmul
//                        ceiling(view, argsPtr, part, parts),        register-only FMAs
//                        attentionForward(view, argsPtr, part, parts),
//                        attentionBackward(view, argsPtr, part, parts),  attention_call.h
//                        geluForward(view, argsPtr, part, parts),
//                        geluBackward(view, argsPtr, part, parts),       activation_call.h
//                        layerNormForward, layerNormBackward, rmsNormForward,
//                        rmsNormBackward (view, argsPtr, part, parts)    norm_call.h
//                        crossEntropyForward, crossEntropyForwardBackward,
//                        crossEntropyBackward (view, argsPtr, part, parts)  cross_entropy_call.h
//                        widen(u16, f32, dtype), narrow(f32, u16, dtype) }  (tests)
// The pool calling convention is csrc's: (argsPtr, part, parts) with the call's argument
// block at argsPtr; every thread of the pool (the caller and each worker) loads this addon
// and calls the same functions. Node-API addons are context-aware: nothing here is per
// process but the CPU detection, which is read-only after its first use.
#include <napi.h>

#include <string.h>

#include <string>

#include "activation_args.h"
#include "attention_args.h"
#include "cross_entropy_args.h"
#include "cpu_isa.h"
#include "matmul_args.h"
#include "matmul_call.h"
#include "norm_args.h"

namespace {

using kiln_native::IsaKernels;

/* The kernels of `name` when this build has them and this CPU runs them, else nullptr. */
const IsaKernels* find_kernels(const std::string& name) {
#if defined(__x86_64__) || defined(_M_X64)
  static const kiln_native::CpuIsas isas = kiln_native::detect_cpu_isas();
  if (name == "avx512" && isas.avx512) return &kiln_native::avx512_kernels();
  if (name == "avx2" && isas.avx2) return &kiln_native::avx2_kernels();
#elif defined(__aarch64__)
  static const kiln_native::CpuIsas isas = kiln_native::detect_cpu_isas();
  if (name == "neon" && isas.neon) return &kiln_native::neon_kernels();
#else
  (void)name;
#endif
  return nullptr;
}

struct Memory {
  uint8_t* base;
  size_t bytes;
};

/* The bytes a typed array views (a SharedArrayBuffer's too). */
Memory memory_of(const Napi::Value& v) {
  napi_typedarray_type type;
  size_t length;
  void* data;
  napi_value buffer;
  size_t offset;
  if (!v.IsTypedArray() || napi_get_typedarray_info(v.Env(), v, &type, &length, &data, &buffer, &offset) != napi_ok ||
      type != napi_uint8_array) {
    throw Napi::TypeError::New(v.Env(), "expected a Uint8Array over the kernels' memory");
  }
  return {static_cast<uint8_t*>(data), length};
}

uint32_t u32_arg(const Napi::CallbackInfo& info, size_t i, const char* what) {
  if (info.Length() <= i || !info[i].IsNumber()) throw Napi::TypeError::New(info.Env(), std::string(what) + " must be a number");
  return info[i].As<Napi::Number>().Uint32Value();
}

/* The part and part count of a pool call: (view, argsPtr, part, parts, ...). */
void part_args(const Napi::CallbackInfo& info, int* part, int* parts) {
  *part = (int)u32_arg(info, 2, "part");
  *parts = (int)u32_arg(info, 3, "parts");
  if (*parts < 1 || *part >= *parts) throw Napi::RangeError::New(info.Env(), "part must be below parts");
}

Napi::Value Matmul(const Napi::CallbackInfo& info) {
  const auto* k = static_cast<const IsaKernels*>(info.Data());
  const Memory mem = memory_of(info[0]);
  int part, parts;
  part_args(info, &part, &parts);
  kiln_native::MatmulCall call;
  const std::string error = kiln_native::decode_matmul(mem.base, mem.bytes, u32_arg(info, 1, "argsPtr"), (int32_t)u32_arg(info, 4, "dtype"), &call);
  if (!error.empty()) throw Napi::RangeError::New(info.Env(), "native matmul: " + error);
  if (call.m > 0 && call.n > 0 && call.batch > 0) k->matmul(call, part, parts);
  return info.Env().Undefined();
}

/* One part of an attention forward or backward (the block of src/attention-dispatch.ts at argsPtr). */
template <bool kBackward>
Napi::Value Attention(const Napi::CallbackInfo& info) {
  const auto* k = static_cast<const IsaKernels*>(info.Data());
  const Memory mem = memory_of(info[0]);
  int part, parts;
  part_args(info, &part, &parts);
  kiln_native::AttentionCall call;
  const std::string error = kiln_native::decode_attention(mem.base, mem.bytes, u32_arg(info, 1, "argsPtr"), kBackward, &call);
  if (!error.empty()) throw Napi::RangeError::New(info.Env(), "native attention: " + error);
  (kBackward ? k->attention_backward : k->attention_forward)(call, part, parts);
  return info.Env().Undefined();
}

/* One part of a GELU forward or backward (ActivationArgs of csrc/activation.c at argsPtr). */
template <bool kBackward>
Napi::Value Gelu(const Napi::CallbackInfo& info) {
  const auto* k = static_cast<const IsaKernels*>(info.Data());
  const Memory mem = memory_of(info[0]);
  int part, parts;
  part_args(info, &part, &parts);
  kiln_native::ActivationCall call;
  const std::string error = kiln_native::decode_activation(mem.base, mem.bytes, u32_arg(info, 1, "argsPtr"), kBackward, &call);
  if (!error.empty()) throw Napi::RangeError::New(info.Env(), "native gelu: " + error);
  (kBackward ? k->gelu_backward : k->gelu_forward)(call, part, parts);
  return info.Env().Undefined();
}

/* One part of a LayerNorm (kLayer) or RMSNorm forward, or of the backward's rows pass (csrc/norm.c's blocks at argsPtr). */
template <bool kBackward, bool kLayer>
Napi::Value Norm(const Napi::CallbackInfo& info) {
  const auto* k = static_cast<const IsaKernels*>(info.Data());
  const Memory mem = memory_of(info[0]);
  int part, parts;
  part_args(info, &part, &parts);
  kiln_native::NormCall call;
  const std::string error = kiln_native::decode_norm(mem.base, mem.bytes, u32_arg(info, 1, "argsPtr"), kBackward, kLayer, &call);
  if (!error.empty()) throw Napi::RangeError::New(info.Env(), std::string(kLayer ? "native layerNorm: " : "native rmsNorm: ") + error);
  (kBackward ? k->norm_backward : k->norm_forward)(call, part, parts);
  return info.Env().Undefined();
}

/* One part of a cross-entropy forward, forward-backward or backward (CrossEntropyArgs of csrc/cross_entropy.c at argsPtr). */
template <kiln_native::CrossEntropyMode kMode>
Napi::Value CrossEntropy(const Napi::CallbackInfo& info) {
  const auto* k = static_cast<const IsaKernels*>(info.Data());
  const Memory mem = memory_of(info[0]);
  int part, parts;
  part_args(info, &part, &parts);
  kiln_native::CrossEntropyCall call;
  const std::string error = kiln_native::decode_cross_entropy(mem.base, mem.bytes, u32_arg(info, 1, "argsPtr"), kMode, &call);
  if (!error.empty()) throw Napi::RangeError::New(info.Env(), "native crossEntropy: " + error);
  k->cross_entropy(call, part, parts);
  return info.Env().Undefined();
}

/* CeilingArgs of csrc/ceiling.c: int32 iterations, then the byte offset of one f32 per part. */
Napi::Value Ceiling(const Napi::CallbackInfo& info) {
  const auto* k = static_cast<const IsaKernels*>(info.Data());
  const Memory mem = memory_of(info[0]);
  const uint32_t args = u32_arg(info, 1, "argsPtr");
  int part, parts;
  part_args(info, &part, &parts);
  if ((uint64_t)args + 8 > mem.bytes) throw Napi::RangeError::New(info.Env(), "native ceiling: the argument block is outside the memory");
  int32_t iterations;
  uint32_t out;
  memcpy(&iterations, mem.base + args, 4);
  memcpy(&out, mem.base + args + 4, 4);
  if ((uint64_t)out + 4ull * (uint64_t)(part + 1) > mem.bytes) throw Napi::RangeError::New(info.Env(), "native ceiling: out is outside the memory");
  const float value = k->ceiling(iterations < 0 ? 0 : iterations);
  memcpy(mem.base + out + 4 * part, &value, 4);
  return info.Env().Undefined();
}

/* widen(u16, f32, dtype) / narrow(f32, u16, dtype): the GEMM's conversions over whole arrays. */
template <bool kWiden>
Napi::Value Convert(const Napi::CallbackInfo& info) {
  const auto* k = static_cast<const IsaKernels*>(info.Data());
  if (info.Length() < 3 || !info[0].IsTypedArray() || !info[1].IsTypedArray()) throw Napi::TypeError::New(info.Env(), "expected (Uint16Array | Float32Array, Float32Array | Uint16Array, dtype)");
  auto in = info[0].As<Napi::TypedArray>(), out = info[1].As<Napi::TypedArray>();
  const napi_typedarray_type want_in = kWiden ? napi_uint16_array : napi_float32_array, want_out = kWiden ? napi_float32_array : napi_uint16_array;
  if (in.TypedArrayType() != want_in || out.TypedArrayType() != want_out || in.ElementLength() != out.ElementLength()) {
    throw Napi::TypeError::New(info.Env(), kWiden ? "widen takes a Uint16Array and a Float32Array of the same length" : "narrow takes a Float32Array and a Uint16Array of the same length");
  }
  const int32_t dt = (int32_t)u32_arg(info, 2, "dtype");
  if (dt != kiln_native::kBf16 && dt != kiln_native::kF16) throw Napi::RangeError::New(info.Env(), "dtype must be bf16 (1) or f16 (2)");
  uint8_t* in_data = static_cast<uint8_t*>(in.ArrayBuffer().Data()) + in.ByteOffset();
  uint8_t* out_data = static_cast<uint8_t*>(out.ArrayBuffer().Data()) + out.ByteOffset();
  if (kWiden) k->widen((const uint16_t*)in_data, (float*)out_data, (int64_t)in.ElementLength(), dt);
  else k->narrow((const float*)in_data, (uint16_t*)out_data, (int64_t)in.ElementLength(), dt);
  return info.Env().Undefined();
}

Napi::Value Kernels(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsString()) throw Napi::TypeError::New(env, "kernels(isa): isa must be a string");
  const std::string name = info[0].As<Napi::String>();
  const IsaKernels* k = find_kernels(name);
  if (!k) throw Napi::Error::New(env, "this CPU or build has no " + name + " kernels (isas() lists those it has)");
  k->prepare_thread();
  void* data = const_cast<IsaKernels*>(k);
  Napi::Object o = Napi::Object::New(env);
  o.Set("isa", Napi::String::New(env, k->name));
  o.Set("mr", Napi::Number::New(env, k->mr));
  o.Set("nr", Napi::Number::New(env, k->nr));
  o.Set("kc", Napi::Number::New(env, k->kc));
  o.Set("ceilingFlopsPerIteration", Napi::Number::New(env, (double)k->ceiling_flops_per_iteration));
  o.Set("matmul", Napi::Function::New(env, Matmul, "matmul", data));
  o.Set("ceiling", Napi::Function::New(env, Ceiling, "ceiling", data));
  o.Set("attentionForward", Napi::Function::New(env, Attention<false>, "attentionForward", data));
  o.Set("attentionBackward", Napi::Function::New(env, Attention<true>, "attentionBackward", data));
  o.Set("geluForward", Napi::Function::New(env, Gelu<false>, "geluForward", data));
  o.Set("geluBackward", Napi::Function::New(env, Gelu<true>, "geluBackward", data));
  o.Set("layerNormForward", Napi::Function::New(env, Norm<false, true>, "layerNormForward", data));
  o.Set("layerNormBackward", Napi::Function::New(env, Norm<true, true>, "layerNormBackward", data));
  o.Set("rmsNormForward", Napi::Function::New(env, Norm<false, false>, "rmsNormForward", data));
  o.Set("rmsNormBackward", Napi::Function::New(env, Norm<true, false>, "rmsNormBackward", data));
  o.Set("crossEntropyForward", Napi::Function::New(env, CrossEntropy<kiln_native::kCrossEntropyForward>, "crossEntropyForward", data));
  o.Set("crossEntropyForwardBackward", Napi::Function::New(env, CrossEntropy<kiln_native::kCrossEntropyForwardBackward>, "crossEntropyForwardBackward", data));
  o.Set("crossEntropyBackward", Napi::Function::New(env, CrossEntropy<kiln_native::kCrossEntropyBackward>, "crossEntropyBackward", data));
  o.Set("widen", Napi::Function::New(env, Convert<true>, "widen", data));
  o.Set("narrow", Napi::Function::New(env, Convert<false>, "narrow", data));
  return o;
}

Napi::Value Isas(const Napi::CallbackInfo& info) {
  Napi::Array out = Napi::Array::New(info.Env());
  uint32_t n = 0;
  for (const char* name : {"avx512", "avx2", "neon"})
    if (find_kernels(name)) out.Set(n++, Napi::String::New(info.Env(), name));
  return out;
}

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("isas", Napi::Function::New(env, Isas, "isas"));
  exports.Set("kernels", Napi::Function::New(env, Kernels, "kernels"));
#if defined(__x86_64__) || defined(_M_X64)
  exports.Set("arch", Napi::String::New(env, "x64"));
#elif defined(__aarch64__)
  exports.Set("arch", Napi::String::New(env, "arm64"));
#else
  exports.Set("arch", Napi::String::New(env, "other"));
#endif
  return exports;
}

}  // namespace

NODE_API_MODULE(kiln_native, Init)
