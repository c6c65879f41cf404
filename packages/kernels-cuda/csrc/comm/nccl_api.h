// nccl_api.h: the part of NCCL's C API that kiln calls, declared here so the addon
// builds without nccl.h and loads libnccl.so.2 at run time (dlopen). Values and
// signatures follow nccl.h of NCCL 2.10 to 2.30; test/nccl-api/check_api.cc
// compiles these declarations against a real nccl.h (the one in pip's
// nvidia-nccl wheel) and fails on any difference.
#pragma once
#include <cstddef>

namespace kiln::nccl {

using Result = int;  // ncclResult_t
constexpr Result kSuccess = 0, kUnhandledCudaError = 1, kSystemError = 2, kInternalError = 3, kInvalidArgument = 4, kInvalidUsage = 5,
                 kRemoteError = 6, kInProgress = 7;

struct Comm;  // opaque (struct ncclComm)
using CommHandle = Comm*;

constexpr size_t kUniqueIdBytes = 128;  // NCCL_UNIQUE_ID_BYTES
struct UniqueId {
  char internal[kUniqueIdBytes];
};

// ncclDataType_t
constexpr int kInt8 = 0, kFloat16 = 6, kFloat32 = 7, kBfloat16 = 9;
// ncclRedOp_t
constexpr int kSum = 0, kAvg = 4;

// NCCL_VERSION(X, Y, Z) for NCCL >= 2.9; older releases encode X * 1000 + Y * 100 + Z.
constexpr int version_code(int major, int minor, int patch) { return major * 10000 + minor * 100 + patch; }
// ncclAvg and ncclBfloat16 came in NCCL 2.10.
constexpr int kMinimumVersion = version_code(2, 10, 0);

// The functions, as pointer types (enum parameters and results are int-sized; cudaStream_t is a pointer).
using GetVersionFn = Result (*)(int* version);
using GetUniqueIdFn = Result (*)(UniqueId* id);
using CommInitRankFn = Result (*)(CommHandle* comm, int nranks, UniqueId id, int rank);
using AllReduceFn = Result (*)(const void* send, void* recv, size_t count, int datatype, int op, CommHandle comm, void* stream);
using BroadcastFn = Result (*)(const void* send, void* recv, size_t count, int datatype, int root, CommHandle comm, void* stream);
// recvcount / sendcount: the elements one rank receives / sends (a chunk), not the whole buffer.
using ReduceScatterFn = Result (*)(const void* send, void* recv, size_t recvcount, int datatype, int op, CommHandle comm, void* stream);
using AllGatherFn = Result (*)(const void* send, void* recv, size_t sendcount, int datatype, CommHandle comm, void* stream);
using CommDestroyFn = Result (*)(CommHandle comm);
using CommAbortFn = Result (*)(CommHandle comm);
using CommGetAsyncErrorFn = Result (*)(CommHandle comm, Result* async_error);
using GetErrorStringFn = const char* (*)(Result result);

}  // namespace kiln::nccl
