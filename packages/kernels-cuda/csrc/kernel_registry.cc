// kernel_registry.cc: contract kernel name -> launcher, filled by each family's
// KILN_REGISTER_KERNEL at load time.
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "kiln_cuda.h"
#include "runtime/raw_runtime.h"

namespace kiln {
namespace {
std::unordered_map<std::string, Launcher>& table() {
  static std::unordered_map<std::string, Launcher> t;
  return t;
}
}  // namespace

KernelRegistration::KernelRegistration(const char* name, Launcher fn) { table()[name] = fn; }

Launcher find_kernel(const std::string& name) {
  auto it = table().find(name);
  return it == table().end() ? nullptr : it->second;
}

std::vector<std::string> kernel_names() {
  std::vector<std::string> names;
  for (auto& [name, fn] : table()) names.push_back(name);
  return names;
}

double KernelCall::at(int i) const {
  if (i < 0 || i >= count) throw DeviceFailure("kernel call has " + std::to_string(count) + " values, argument " + std::to_string(i) + " was read");
  return values[i];
}

void throw_bad_dtype(const char* kernel, int dtype) { throw DeviceFailure(std::string(kernel) + ": unsupported dtype code " + std::to_string(dtype)); }

}  // namespace kiln
