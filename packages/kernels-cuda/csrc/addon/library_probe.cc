#include "library_probe.h"

#include <dlfcn.h>

#include <cstddef>

namespace kiln {

LibraryVersion probe_library_version(const std::string& path, const std::string& kind) {
  LibraryVersion v;
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* why = dlerror();
    v.error = why ? why : "dlopen failed";
    return v;
  }
  long code = 0;
  if (kind == "cublasLt") {
    // Encoded major * 10000 + minor * 100 + patch.
    auto fn = reinterpret_cast<size_t (*)()>(dlsym(lib, "cublasLtGetVersion"));
    if (!fn) {
      v.error = "cublasLtGetVersion not found in " + path;
      return v;
    }
    code = static_cast<long>(fn());
  } else if (kind == "nccl") {
    // NCCL >= 2.9 encodes major * 10000 + minor * 100 + patch (older: major * 1000 + minor * 100 + patch).
    auto fn = reinterpret_cast<int (*)(int*)>(dlsym(lib, "ncclGetVersion"));
    int out = 0;
    if (!fn || fn(&out) != 0) {
      v.error = "ncclGetVersion not found or failed in " + path;
      return v;
    }
    code = out;
    if (code < 10000) {
      v.ok = true;
      v.major = static_cast<int>(code / 1000);
      v.minor = static_cast<int>(code % 1000 / 100);
      v.patch = static_cast<int>(code % 100);
      return v;
    }
  } else {
    v.error = "unknown library kind " + kind;
    return v;
  }
  v.ok = true;
  v.major = static_cast<int>(code / 10000);
  v.minor = static_cast<int>(code % 10000 / 100);
  v.patch = static_cast<int>(code % 100);
  return v;
}

}  // namespace kiln
