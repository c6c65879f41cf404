#include "cublaslt_matmul.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

#include "../runtime/sizing_call.h"
#include "../runtime/raw_runtime.h"

namespace kiln {
namespace {

constexpr int kF32 = 0, kBF16 = 1, kF16 = 2;  // the dtype codes of kiln_cuda.h

int data_type(int dtype) { return dtype == kBF16 ? lt::kR16BF : dtype == kF16 ? lt::kR16F : lt::kR32F; }
size_t element_bytes(int dtype) { return dtype == kF32 ? 4 : 2; }

/** The largest power of two (at most 256) dividing the address and, with batches, every batch item's offset. */
uint32_t alignment(const void* p, int64_t stride_elements, int64_t batch, size_t elem) {
  uint64_t bits = reinterpret_cast<uintptr_t>(p) | 256;
  if (batch > 1 && stride_elements != 0) bits |= static_cast<uint64_t>(stride_elements) * elem;
  return static_cast<uint32_t>(bits & (~bits + 1));
}

template <typename F>
F symbol(void* lib, const char* name, const std::string& path) {
  void* s = dlsym(lib, name);
  if (!s) throw DeviceFailure(std::string("cuBLASLt at ") + path + " has no " + name + ": it is not a cuBLASLt library kiln can use (CUDA 12 or 13)");
  return reinterpret_cast<F>(s);
}

}  // namespace

CublasLt::CublasLt(const std::string& path, bool tf32) : tf32_(tf32), log_(std::getenv("KILN_CUBLASLT_LOG") != nullptr) {
  lib_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib_) {
    const char* why = dlerror();
    throw DeviceFailure("cannot load cuBLASLt from " + path + ": " + (why ? why : "dlopen failed"));
  }
  try {
    auto get_version = symbol<lt::GetVersionFn>(lib_, "cublasLtGetVersion", path);
    size_t v = get_version();
    if (v / 10000 < 12) throw DeviceFailure("cuBLASLt at " + path + " is version " + std::to_string(v) + "; kiln needs 12 or newer");
    version_ = std::to_string(v / 10000) + "." + std::to_string(v % 10000 / 100) + "." + std::to_string(v % 100);
    create_ = symbol<lt::CreateFn>(lib_, "cublasLtCreate", path);
    destroy_ = symbol<lt::DestroyFn>(lib_, "cublasLtDestroy", path);
    desc_create_ = symbol<lt::MatmulDescCreateFn>(lib_, "cublasLtMatmulDescCreate", path);
    desc_destroy_ = symbol<lt::MatmulDescDestroyFn>(lib_, "cublasLtMatmulDescDestroy", path);
    desc_set_ = symbol<lt::MatmulDescSetAttributeFn>(lib_, "cublasLtMatmulDescSetAttribute", path);
    layout_create_ = symbol<lt::LayoutCreateFn>(lib_, "cublasLtMatrixLayoutCreate", path);
    layout_destroy_ = symbol<lt::LayoutDestroyFn>(lib_, "cublasLtMatrixLayoutDestroy", path);
    layout_set_ = symbol<lt::LayoutSetAttributeFn>(lib_, "cublasLtMatrixLayoutSetAttribute", path);
    pref_create_ = symbol<lt::PreferenceCreateFn>(lib_, "cublasLtMatmulPreferenceCreate", path);
    pref_destroy_ = symbol<lt::PreferenceDestroyFn>(lib_, "cublasLtMatmulPreferenceDestroy", path);
    pref_set_ = symbol<lt::PreferenceSetAttributeFn>(lib_, "cublasLtMatmulPreferenceSetAttribute", path);
    heuristic_ = symbol<lt::AlgoGetHeuristicFn>(lib_, "cublasLtMatmulAlgoGetHeuristic", path);
    matmul_ = symbol<lt::MatmulFn>(lib_, "cublasLtMatmul", path);
    lt::Status st = create_(&handle_);
    if (st != lt::kSuccess) throw DeviceFailure("cublasLtCreate failed with status " + std::to_string(st) + " (cuBLASLt at " + path + ")");
  } catch (...) {
    dlclose(lib_);
    throw;
  }
}

size_t CublasLt::PlanKeyHash::operator()(const PlanKey& k) const {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the values
  for (int64_t v : k) h = (h ^ static_cast<uint64_t>(v)) * 1099511628211ull;
  return static_cast<size_t>(h);
}

CublasLt::~CublasLt() {
  for (auto& [key, plan] : plans_) destroy(plan);
  if (handle_) destroy_(handle_);
  // The library stays loaded: cuBLASLt keeps process-wide state that outlives a handle.
}

void CublasLt::destroy(Plan& plan) {
  if (plan.desc) desc_destroy_(plan.desc);
  for (lt::Layout l : {plan.a, plan.b, plan.c})
    if (l) layout_destroy_(l);
  plan = Plan{};
}

CublasLt::Plan& CublasLt::plan_for(const BlasMatmul& p, void* workspace, size_t workspace_bytes) {
  const size_t elem = element_bytes(p.dtype);
  const uint32_t align_a = alignment(p.a, p.stride_a, p.batch, elem), align_b = alignment(p.b, p.stride_b, p.batch, elem);
  const uint32_t align_c = alignment(p.c, p.stride_c, p.batch, element_bytes(p.c_dtype));
  const uint32_t align_bias = p.bias ? alignment(p.bias, 0, 1, elem) : 256;
  const PlanKey key{p.m, p.n, p.k, p.batch, p.trans_a, p.trans_b, p.lda, p.stride_a, p.stride_b, p.stride_c, p.accumulate, p.dtype, p.c_dtype, p.bias != nullptr, align_a, align_b, align_c, align_bias};
  auto found = plans_.find(key);
  if (found != plans_.end()) return found->second;
  Plan& plan = plans_[key];

  const int type = data_type(p.dtype);
  const int compute = p.dtype == kF32 && tf32_ ? lt::kCompute32FFastTF32 : lt::kCompute32F;
  std::string failed;  // the first step that failed, for KILN_CUBLASLT_LOG
  auto step = [&](lt::Status st, const char* what) {
    if (failed.empty() && st != lt::kSuccess) failed = std::string(what) + " returned status " + std::to_string(st);
    return failed.empty();
  };
  bool ok = step(desc_create_(&plan.desc, compute, lt::kR32F), "MatmulDescCreate");
  // Column-major view: the first operand is our B, n x k after its op; the second is our A, k x m.
  const int32_t op_first = p.trans_b ? lt::kOpT : lt::kOpN, op_second = p.trans_a ? lt::kOpT : lt::kOpN;
  const uint32_t epilogue = p.bias ? lt::kEpilogueBias : lt::kEpilogueDefault;
  ok = ok && step(desc_set_(plan.desc, lt::kDescTransA, &op_first, sizeof op_first), "desc_set_");
  ok = ok && step(desc_set_(plan.desc, lt::kDescTransB, &op_second, sizeof op_second), "desc_set_");
  ok = ok && step(desc_set_(plan.desc, lt::kDescEpilogue, &epilogue, sizeof epilogue), "desc_set_");
  if (p.bias) ok = ok && step(desc_set_(plan.desc, lt::kDescBiasPointer, &p.bias, sizeof p.bias), "desc_set_");
  // Stored shapes, column-major: B is (n, k) with ld n, or (k, n) with ld k when transB; A likewise with m, its ld lda.
  const uint64_t b_rows = p.trans_b ? p.k : p.n, b_cols = p.trans_b ? p.n : p.k;
  const uint64_t a_rows = p.trans_a ? p.m : p.k, a_cols = p.trans_a ? p.k : p.m;
  ok = ok && step(layout_create_(&plan.a, type, b_rows, b_cols, static_cast<int64_t>(b_rows)), "layout_create_");
  ok = ok && step(layout_create_(&plan.b, type, a_rows, a_cols, p.lda), "layout_create_");
  ok = ok && step(layout_create_(&plan.c, data_type(p.c_dtype), p.n, p.m, p.n), "layout_create_");
  if (ok && p.batch > 1) {
    const int32_t count = static_cast<int32_t>(p.batch);
    for (auto [layout, stride] : {std::pair{plan.a, p.stride_b}, std::pair{plan.b, p.stride_a}, std::pair{plan.c, p.stride_c}}) {
      ok = ok && step(layout_set_(layout, lt::kLayoutBatchCount, &count, sizeof count), "layout_set_");
      ok = ok && step(layout_set_(layout, lt::kLayoutStridedBatchOffset, &stride, sizeof stride), "layout_set_");
    }
  }
  lt::Preference pref = nullptr;
  ok = ok && step(pref_create_(&pref), "pref_create_");
  if (ok) {
    const uint64_t ws = workspace ? workspace_bytes : 0;
    ok = step(pref_set_(pref, lt::kPrefMaxWorkspaceBytes, &ws, sizeof ws), "pref_set_ workspace");
    // The first operand of the column-major product is our B, the second our A.
    for (auto [attr, value] : {std::pair{lt::kPrefMinAlignmentA, align_b}, std::pair{lt::kPrefMinAlignmentB, align_a}, std::pair{lt::kPrefMinAlignmentC, align_c},
                               std::pair{lt::kPrefMinAlignmentD, align_c}})
      ok = ok && step(pref_set_(pref, attr, &value, sizeof value), "pref_set_");
    lt::HeuristicResult result{};
    int returned = 0;
    ok = ok && step(heuristic_(handle_, plan.desc, plan.a, plan.b, plan.c, plan.c, pref, 1, &result, &returned), "MatmulAlgoGetHeuristic");
    if (ok && returned == 0) failed = "the heuristic offered no algorithm";
    else if (ok && result.state != lt::kSuccess) failed = "the heuristic's algorithm has status " + std::to_string(result.state);
    else if (ok && result.workspaceSize > ws) failed = "the algorithm needs " + std::to_string(result.workspaceSize) + " bytes of workspace";
    ok = failed.empty();
    if (ok) plan.algo = result.algo;
  }
  if (pref) pref_destroy_(pref);
  plan.usable = ok;
  if (log_) {
    std::string shape;
    for (int64_t v : key) shape += std::to_string(v) + ",";
    std::fprintf(stderr, "kiln cuBLASLt matmul %s: %s\n", shape.c_str(), ok ? "algorithm found" : ("kiln's kernel runs it: " + failed).c_str());
  }
  return plan;
}

bool CublasLt::matmul(const BlasMatmul& p, void* stream, void* workspace, size_t workspace_bytes) {
  if (p.batch > INT32_MAX) return false;
  // The bias epilogue would read the bias in C's type: an f32 C with a 16-bit bias runs kiln's kernel.
  if (p.bias && p.c_dtype != p.dtype) return false;
  Plan& plan = plan_for(p, workspace, workspace_bytes);
  if (!plan.usable) return false;
  if (sizing_call()) return true;  // the call takes this path; nothing runs while it is sized
  if (p.bias && desc_set_(plan.desc, lt::kDescBiasPointer, &p.bias, sizeof p.bias) != lt::kSuccess) return false;
  const float alpha = p.alpha, beta = p.accumulate ? 1.0f : 0.0f;
  lt::Status st = matmul_(handle_, plan.desc, &alpha, p.b, plan.a, p.a, plan.b, &beta, p.c, plan.c, p.c, plan.c, &plan.algo, workspace, workspace_bytes, stream);
  if (st != lt::kSuccess) throw DeviceFailure("cublasLtMatmul failed with status " + std::to_string(st) + " (m=" + std::to_string(p.m) + " n=" + std::to_string(p.n) + " k=" + std::to_string(p.k) + ")");
  return true;
}

}  // namespace kiln
