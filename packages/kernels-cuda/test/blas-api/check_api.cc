// Compiles kiln's cuBLASLt declarations (csrc/blas/cublaslt_api.h) against the real
// cublasLt.h: any difference in a value, a struct layout or a function's parameter
// count or sizes is a compile error. Built by test/cublaslt-api.test.ts when a
// machine has the header.
#include <cublasLt.h>

#include <cstddef>
#include <tuple>
#include <type_traits>

#include "../../csrc/blas/cublaslt_api.h"

namespace lt = kiln::lt;

static_assert(lt::kSuccess == CUBLAS_STATUS_SUCCESS);
static_assert(lt::kR32F == CUDA_R_32F && lt::kR16F == CUDA_R_16F && lt::kR16BF == CUDA_R_16BF);
static_assert(lt::kCompute32F == CUBLAS_COMPUTE_32F && lt::kCompute32FFastTF32 == CUBLAS_COMPUTE_32F_FAST_TF32);
static_assert(lt::kOpN == CUBLAS_OP_N && lt::kOpT == CUBLAS_OP_T);
static_assert(lt::kDescTransA == CUBLASLT_MATMUL_DESC_TRANSA && lt::kDescTransB == CUBLASLT_MATMUL_DESC_TRANSB);
static_assert(lt::kDescEpilogue == CUBLASLT_MATMUL_DESC_EPILOGUE && lt::kDescBiasPointer == CUBLASLT_MATMUL_DESC_BIAS_POINTER);
static_assert(lt::kEpilogueDefault == CUBLASLT_EPILOGUE_DEFAULT && lt::kEpilogueBias == CUBLASLT_EPILOGUE_BIAS);
static_assert(lt::kLayoutBatchCount == CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT && lt::kLayoutStridedBatchOffset == CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET);
static_assert(lt::kPrefMaxWorkspaceBytes == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES);
static_assert(lt::kPrefMinAlignmentA == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES && lt::kPrefMinAlignmentB == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES);
static_assert(lt::kPrefMinAlignmentC == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES && lt::kPrefMinAlignmentD == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES);

static_assert(sizeof(lt::MatmulAlgo) == sizeof(cublasLtMatmulAlgo_t));
static_assert(sizeof(lt::HeuristicResult) == sizeof(cublasLtMatmulHeuristicResult_t));
static_assert(offsetof(lt::HeuristicResult, workspaceSize) == offsetof(cublasLtMatmulHeuristicResult_t, workspaceSize));
static_assert(offsetof(lt::HeuristicResult, state) == offsetof(cublasLtMatmulHeuristicResult_t, state));
static_assert(sizeof(lt::Status) == sizeof(cublasStatus_t));

// Attribute value types: the sizes the library checks against.
static_assert(sizeof(int32_t) == sizeof(cublasOperation_t) && sizeof(uint32_t) == sizeof(cublasLtEpilogue_t));

/** Same return size, same parameter count, each parameter the same size. */
template <typename A, typename B>
struct SameShape : std::false_type {};
template <typename RA, typename... A, typename RB, typename... B>
struct SameShape<RA (*)(A...), RB (*)(B...)> {
  static constexpr bool value = sizeof(RA) == sizeof(RB) && sizeof...(A) == sizeof...(B) && ((sizeof(A) == sizeof(B)) && ...);
};
#define KILN_SAME(ours, theirs) static_assert(SameShape<lt::ours, decltype(&theirs)>::value, #theirs " differs from lt::" #ours)
KILN_SAME(CreateFn, cublasLtCreate);
KILN_SAME(DestroyFn, cublasLtDestroy);
KILN_SAME(GetVersionFn, cublasLtGetVersion);
KILN_SAME(MatmulDescCreateFn, cublasLtMatmulDescCreate);
KILN_SAME(MatmulDescDestroyFn, cublasLtMatmulDescDestroy);
KILN_SAME(MatmulDescSetAttributeFn, cublasLtMatmulDescSetAttribute);
KILN_SAME(LayoutCreateFn, cublasLtMatrixLayoutCreate);
KILN_SAME(LayoutDestroyFn, cublasLtMatrixLayoutDestroy);
KILN_SAME(LayoutSetAttributeFn, cublasLtMatrixLayoutSetAttribute);
KILN_SAME(PreferenceCreateFn, cublasLtMatmulPreferenceCreate);
KILN_SAME(PreferenceDestroyFn, cublasLtMatmulPreferenceDestroy);
KILN_SAME(PreferenceSetAttributeFn, cublasLtMatmulPreferenceSetAttribute);
KILN_SAME(AlgoGetHeuristicFn, cublasLtMatmulAlgoGetHeuristic);
KILN_SAME(MatmulFn, cublasLtMatmul);

int main() { return 0; }
