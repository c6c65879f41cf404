// nccl_library.h: NCCL loaded at run time (dlopen of libnccl.so.2 or a given file),
// checked once: the file loads, it is NCCL 2.10 or newer, and it has every function
// kiln calls. A library that passes stays loaded for the life of the process (NCCL
// keeps process-wide state); one that fails is reported and may be retried.
#pragma once
#include <stdexcept>
#include <string>

#include "nccl_api.h"

namespace kiln {

/** Why NCCL cannot be used; `code` is what JavaScript sees as the error's code. */
struct NcclFailure : std::runtime_error {
  NcclFailure(const std::string& code, const std::string& what) : std::runtime_error(what), code(code) {}
  // KILN_NCCL_MISSING (dlopen failed), KILN_NCCL_TOO_OLD, KILN_NCCL_SYMBOL (not an NCCL kiln can use),
  // KILN_NCCL_ERROR (a call failed), KILN_NCCL_TIMEOUT (a collective did not complete in time)
  std::string code;
};

struct NcclLibrary {
  std::string path;     // the file the loader opened
  std::string version;  // "2.30.7"
  nccl::GetVersionFn get_version;
  nccl::GetUniqueIdFn get_unique_id;
  nccl::CommInitRankFn comm_init_rank;
  nccl::AllReduceFn all_reduce;
  nccl::BroadcastFn broadcast;
  nccl::ReduceScatterFn reduce_scatter;
  nccl::AllGatherFn all_gather;
  nccl::CommDestroyFn comm_destroy;
  nccl::CommAbortFn comm_abort;
  nccl::CommGetAsyncErrorFn comm_get_async_error;
  nccl::GetErrorStringFn get_error_string;

  /** "unhandled system error (ncclSystemError, 2)" style text for a result code. */
  std::string describe(nccl::Result r) const;
};

/**
 * The NCCL at `path` (a file, or a bare name such as "libnccl.so.2" that the dynamic
 * loader looks up), loaded once per path; throws NcclFailure saying what is wrong.
 */
const NcclLibrary& load_nccl(const std::string& path);

}  // namespace kiln
