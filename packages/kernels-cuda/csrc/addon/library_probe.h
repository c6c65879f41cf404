// library_probe.h: the version of an optional NVIDIA library found at run time
// (cuBLASLt, NCCL), read by dlopen + dlsym of its version function, so that kiln
// never links against them and reports precisely what a machine has.
#pragma once
#include <string>

namespace kiln {

struct LibraryVersion {
  bool ok = false;
  int major = 0, minor = 0, patch = 0;
  std::string error;  // why the version could not be read
};

/** kind: "cublasLt" (size_t cublasLtGetVersion()) or "nccl" (ncclResult_t ncclGetVersion(int*)). */
LibraryVersion probe_library_version(const std::string& path, const std::string& kind);

}  // namespace kiln
