#include "nccl_library.h"

#include <dlfcn.h>

#include <map>
#include <memory>
#include <mutex>

namespace kiln {
namespace {

std::mutex g_mu;
std::map<std::string, std::unique_ptr<NcclLibrary>> g_loaded;

std::string version_text(int code) {
  // NCCL before 2.9 encoded X * 1000 + Y * 100 + Z.
  if (code < 10000) return std::to_string(code / 1000) + "." + std::to_string(code % 1000 / 100) + "." + std::to_string(code % 100);
  return std::to_string(code / 10000) + "." + std::to_string(code % 10000 / 100) + "." + std::to_string(code % 100);
}

const char* result_name(nccl::Result r) {
  switch (r) {
    case nccl::kSuccess: return "ncclSuccess";
    case nccl::kUnhandledCudaError: return "ncclUnhandledCudaError";
    case nccl::kSystemError: return "ncclSystemError";
    case nccl::kInternalError: return "ncclInternalError";
    case nccl::kInvalidArgument: return "ncclInvalidArgument";
    case nccl::kInvalidUsage: return "ncclInvalidUsage";
    case nccl::kRemoteError: return "ncclRemoteError";
    case nccl::kInProgress: return "ncclInProgress";
    default: return "ncclResult_t";
  }
}

/** Where the loader found the library: the file holding one of its symbols. */
std::string file_of(void* symbol, const std::string& fallback) {
  Dl_info info{};
  return dladdr(symbol, &info) && info.dli_fname ? info.dli_fname : fallback;
}

template <typename F>
F symbol(void* lib, const char* name, const std::string& file, const std::string& version) {
  void* s = dlsym(lib, name);
  if (!s) {
    throw NcclFailure("KILN_NCCL_SYMBOL", "the NCCL library at " + file + " (version " + version + ") has no " + name +
                                              ": it is not an NCCL build kiln can use");
  }
  return reinterpret_cast<F>(s);
}

std::unique_ptr<NcclLibrary> open_library(const std::string& path) {
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* why = dlerror();
    throw NcclFailure("KILN_NCCL_MISSING", "cannot load NCCL (" + path + "): " + (why ? why : "dlopen failed"));
  }
  try {
    void* get_version = dlsym(lib, "ncclGetVersion");
    if (!get_version) throw NcclFailure("KILN_NCCL_SYMBOL", "the library " + path + " has no ncclGetVersion: it is not NCCL");
    auto lib_out = std::make_unique<NcclLibrary>();
    NcclLibrary& l = *lib_out;
    l.path = file_of(get_version, path);
    l.get_version = reinterpret_cast<nccl::GetVersionFn>(get_version);
    int code = 0;
    nccl::Result r = l.get_version(&code);
    if (r != nccl::kSuccess) throw NcclFailure("KILN_NCCL_ERROR", "ncclGetVersion failed (" + std::string(result_name(r)) + ") in " + l.path);
    l.version = version_text(code);
    if (code < nccl::kMinimumVersion) {
      throw NcclFailure("KILN_NCCL_TOO_OLD", "the NCCL at " + l.path + " is version " + l.version + "; kiln needs NCCL " +
                                                 version_text(nccl::kMinimumVersion) + " or newer (for ncclAvg and bfloat16)");
    }
    l.get_unique_id = symbol<nccl::GetUniqueIdFn>(lib, "ncclGetUniqueId", l.path, l.version);
    l.comm_init_rank = symbol<nccl::CommInitRankFn>(lib, "ncclCommInitRank", l.path, l.version);
    l.all_reduce = symbol<nccl::AllReduceFn>(lib, "ncclAllReduce", l.path, l.version);
    l.broadcast = symbol<nccl::BroadcastFn>(lib, "ncclBroadcast", l.path, l.version);
    l.reduce_scatter = symbol<nccl::ReduceScatterFn>(lib, "ncclReduceScatter", l.path, l.version);
    l.all_gather = symbol<nccl::AllGatherFn>(lib, "ncclAllGather", l.path, l.version);
    l.comm_destroy = symbol<nccl::CommDestroyFn>(lib, "ncclCommDestroy", l.path, l.version);
    l.comm_abort = symbol<nccl::CommAbortFn>(lib, "ncclCommAbort", l.path, l.version);
    l.comm_get_async_error = symbol<nccl::CommGetAsyncErrorFn>(lib, "ncclCommGetAsyncError", l.path, l.version);
    l.get_error_string = symbol<nccl::GetErrorStringFn>(lib, "ncclGetErrorString", l.path, l.version);
    return lib_out;
  } catch (...) {
    dlclose(lib);
    throw;
  }
}

}  // namespace

std::string NcclLibrary::describe(nccl::Result r) const {
  const char* text = get_error_string ? get_error_string(r) : nullptr;
  return std::string(text ? text : "unknown NCCL result") + " (" + result_name(r) + ", " + std::to_string(r) + ")";
}

const NcclLibrary& load_nccl(const std::string& path) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_loaded.find(path);
  if (it != g_loaded.end()) return *it->second;
  auto lib = open_library(path);
  return *g_loaded.emplace(path, std::move(lib)).first->second;
}

}  // namespace kiln
