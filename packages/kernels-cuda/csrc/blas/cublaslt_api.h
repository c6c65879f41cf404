// cublaslt_api.h: the part of cuBLASLt's C API that kiln calls, declared here so
// the addon builds without cuBLAS headers and loads the library at run time
// (dlopen). Values, struct layouts and signatures follow cublasLt.h / cublas_api.h
// / library_types.h of CUDA 12 and 13; test/blas-api/check_api.cc compiles these
// declarations against the real headers, when a machine has them, and fails on any
// difference.
#pragma once
#include <cstddef>
#include <cstdint>

namespace kiln::lt {

using Status = int;  // cublasStatus_t
constexpr Status kSuccess = 0;

struct Context;  // opaque
using Handle = Context*;
struct MatmulDescOpaque { uint64_t data[32]; };
using MatmulDesc = MatmulDescOpaque*;
struct LayoutOpaque { uint64_t data[8]; };
using Layout = LayoutOpaque*;
struct PreferenceOpaque { uint64_t data[8]; };
using Preference = PreferenceOpaque*;
struct MatmulAlgo { uint64_t data[8]; };
struct HeuristicResult {
  MatmulAlgo algo;
  size_t workspaceSize;
  Status state;
  float wavesCount;
  int reserved[4];
};

// cudaDataType_t
constexpr int kR32F = 0, kR16F = 2, kR16BF = 14;
// cublasComputeType_t
constexpr int kCompute32F = 68, kCompute32FFastTF32 = 77;
// cublasOperation_t
constexpr int32_t kOpN = 0, kOpT = 1;
// cublasLtMatmulDescAttributes_t (value types: int32, int32, int32, uint32, void*)
constexpr int kDescTransA = 3, kDescTransB = 4, kDescEpilogue = 7, kDescBiasPointer = 8;
// cublasLtEpilogue_t
constexpr uint32_t kEpilogueDefault = 1, kEpilogueBias = 4;
// cublasLtMatrixLayoutAttribute_t (int32 batch count, int64 stride in elements)
constexpr int kLayoutBatchCount = 5, kLayoutStridedBatchOffset = 6;
// cublasLtMatmulPreferenceAttributes_t (uint64 workspace, uint32 alignments)
constexpr int kPrefMaxWorkspaceBytes = 1, kPrefMinAlignmentA = 5, kPrefMinAlignmentB = 6, kPrefMinAlignmentC = 7, kPrefMinAlignmentD = 8;

// The functions, as pointer types (enum parameters are int-sized).
using CreateFn = Status (*)(Handle*);
using DestroyFn = Status (*)(Handle);
using GetVersionFn = size_t (*)();
using MatmulDescCreateFn = Status (*)(MatmulDesc*, int computeType, int scaleType);
using MatmulDescDestroyFn = Status (*)(MatmulDesc);
using MatmulDescSetAttributeFn = Status (*)(MatmulDesc, int attr, const void* buf, size_t bytes);
using LayoutCreateFn = Status (*)(Layout*, int type, uint64_t rows, uint64_t cols, int64_t ld);
using LayoutDestroyFn = Status (*)(Layout);
using LayoutSetAttributeFn = Status (*)(Layout, int attr, const void* buf, size_t bytes);
using PreferenceCreateFn = Status (*)(Preference*);
using PreferenceDestroyFn = Status (*)(Preference);
using PreferenceSetAttributeFn = Status (*)(Preference, int attr, const void* buf, size_t bytes);
using AlgoGetHeuristicFn = Status (*)(Handle, MatmulDesc, Layout, Layout, Layout, Layout, Preference, int requested, HeuristicResult* results, int* returned);
using MatmulFn = Status (*)(Handle, MatmulDesc, const void* alpha, const void* a, Layout, const void* b, Layout, const void* beta, const void* c, Layout, void* d, Layout,
                            const MatmulAlgo* algo, void* workspace, size_t workspaceBytes, void* stream /* cudaStream_t */);

}  // namespace kiln::lt
