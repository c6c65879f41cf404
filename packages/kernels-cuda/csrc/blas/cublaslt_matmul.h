// cublaslt_matmul.h: the contract's matmul through cuBLASLt, loaded at run time.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>

#include "cublaslt_api.h"

namespace kiln {

/** One matmul call in the contract's row-major terms (csrc/matmul.cu explains them). */
struct BlasMatmul {
  const void* a;
  const void* b;
  const void* bias;  // null when absent
  void* c;
  int m, n, k;
  int64_t batch;
  bool trans_a, trans_b;
  int64_t lda;  // elements between A's stored rows (k, or m when trans_a, or more)
  int64_t stride_a, stride_b, stride_c;
  float alpha;
  bool accumulate;
  int dtype;    // A, B and bias: kF32 / kBF16 / kF16
  int c_dtype;  // C: dtype, or kF32 with 16-bit A and B
};

/**
 * cuBLASLt opened from a shared library file. Row-major C = op(A) op(B) is computed
 * as the column-major product C^T = op(B)^T op(A)^T, so A and B swap places and keep
 * their own storage. Descriptors and the chosen algorithm are cached per shape,
 * flags and pointer alignment; the same call always runs the same algorithm.
 * KILN_CUBLASLT_LOG=1 prints each new shape's outcome (algorithm, or why not) to stderr.
 * An f32 C with 16-bit A and B (compute 32F) is one of cuBLASLt's documented type
 * combinations, but its bias epilogue reads the bias in D's type (f32) where ours is
 * 16-bit: that case (f32 C and a bias) is left to kiln's kernels.
 */
class CublasLt {
 public:
  /** Opens the library at `path`; throws DeviceFailure that says why not. tf32: f32 products may round inputs to TF32. */
  CublasLt(const std::string& path, bool tf32);
  ~CublasLt();
  CublasLt(const CublasLt&) = delete;
  CublasLt& operator=(const CublasLt&) = delete;

  /** Enqueues the product; false when cuBLASLt offers no algorithm for it (the caller runs its own kernel). */
  bool matmul(const BlasMatmul& p, void* stream, void* workspace, size_t workspace_bytes);
  /** "13.1.1" */
  const std::string& version() const { return version_; }
  static constexpr size_t kWorkspaceBytes = size_t{32} << 20;

 private:
  /** Shape, flags, strides, dtypes, bias and the four pointer alignments: what picks an algorithm. */
  using PlanKey = std::array<int64_t, 18>;
  struct PlanKeyHash {
    size_t operator()(const PlanKey& k) const;
  };
  struct Plan {
    lt::MatmulDesc desc = nullptr;
    lt::Layout a = nullptr, b = nullptr, c = nullptr;
    lt::MatmulAlgo algo{};
    bool usable = false;
  };
  Plan& plan_for(const BlasMatmul& p, void* workspace, size_t workspace_bytes);
  void destroy(Plan& plan);

  void* lib_ = nullptr;
  lt::Handle handle_ = nullptr;
  bool tf32_;
  bool log_;  // KILN_CUBLASLT_LOG set: each new plan's outcome goes to stderr
  std::string version_;
  std::unordered_map<PlanKey, Plan, PlanKeyHash> plans_;
  lt::CreateFn create_;
  lt::DestroyFn destroy_;
  lt::MatmulDescCreateFn desc_create_;
  lt::MatmulDescDestroyFn desc_destroy_;
  lt::MatmulDescSetAttributeFn desc_set_;
  lt::LayoutCreateFn layout_create_;
  lt::LayoutDestroyFn layout_destroy_;
  lt::LayoutSetAttributeFn layout_set_;
  lt::PreferenceCreateFn pref_create_;
  lt::PreferenceDestroyFn pref_destroy_;
  lt::PreferenceSetAttributeFn pref_set_;
  lt::AlgoGetHeuristicFn heuristic_;
  lt::MatmulFn matmul_;
};

}  // namespace kiln
