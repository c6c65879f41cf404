// Compiles kiln's NCCL declarations (csrc/comm/nccl_api.h) against a real nccl.h:
// any difference in a value, the unique id's size or a function's parameter count
// or sizes is a compile error. Built by test/nccl-real.test.ts when a machine has
// the header (or pip's nvidia-nccl wheel to take it from).
#include <nccl.h>

#include <type_traits>

#include "../../csrc/comm/nccl_api.h"

namespace n = kiln::nccl;

static_assert(n::kSuccess == ncclSuccess && n::kUnhandledCudaError == ncclUnhandledCudaError && n::kSystemError == ncclSystemError);
static_assert(n::kInternalError == ncclInternalError && n::kInvalidArgument == ncclInvalidArgument && n::kInvalidUsage == ncclInvalidUsage);
static_assert(n::kRemoteError == ncclRemoteError && n::kInProgress == ncclInProgress);
static_assert(n::kInt8 == ncclInt8 && n::kFloat16 == ncclFloat16 && n::kFloat32 == ncclFloat32 && n::kBfloat16 == ncclBfloat16);
static_assert(n::kSum == ncclSum && n::kAvg == ncclAvg);
static_assert(n::kUniqueIdBytes == NCCL_UNIQUE_ID_BYTES && sizeof(n::UniqueId) == sizeof(ncclUniqueId));
static_assert(sizeof(n::Result) == sizeof(ncclResult_t) && sizeof(int) == sizeof(ncclDataType_t) && sizeof(int) == sizeof(ncclRedOp_t));
static_assert(n::version_code(2, 30, 7) == NCCL_VERSION(2, 30, 7) && n::kMinimumVersion == NCCL_VERSION(2, 10, 0));
static_assert(NCCL_VERSION_CODE >= n::kMinimumVersion);

/** Same return size, same parameter count, each parameter the same size. */
template <typename A, typename B>
struct SameShape : std::false_type {};
template <typename RA, typename... A, typename RB, typename... B>
struct SameShape<RA (*)(A...), RB (*)(B...)> {
  static constexpr bool value = sizeof(RA) == sizeof(RB) && sizeof...(A) == sizeof...(B) && ((sizeof(A) == sizeof(B)) && ...);
};
#define KILN_SAME(ours, theirs) static_assert(SameShape<n::ours, decltype(&theirs)>::value, #theirs " differs from nccl::" #ours)
KILN_SAME(GetVersionFn, ncclGetVersion);
KILN_SAME(GetUniqueIdFn, ncclGetUniqueId);
KILN_SAME(CommInitRankFn, ncclCommInitRank);
KILN_SAME(AllReduceFn, ncclAllReduce);
KILN_SAME(BroadcastFn, ncclBroadcast);
KILN_SAME(ReduceScatterFn, ncclReduceScatter);
KILN_SAME(AllGatherFn, ncclAllGather);
KILN_SAME(CommDestroyFn, ncclCommDestroy);
KILN_SAME(CommAbortFn, ncclCommAbort);
KILN_SAME(CommGetAsyncErrorFn, ncclCommGetAsyncError);
KILN_SAME(GetErrorStringFn, ncclGetErrorString);
