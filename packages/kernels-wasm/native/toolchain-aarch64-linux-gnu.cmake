# Cross-compiles the native addon for 64-bit Arm Linux with Debian's cross toolchain
# (apt-get install g++-aarch64-linux-gnu), from scripts/build-native.mjs --cross arm64.
# Node's headers (cmake-js) are the same on every architecture, and the addon leaves
# Node's own symbols undefined for the process that loads it, so nothing of an arm64 Node
# is needed; the result runs on an arm64 machine only (CMakeLists.txt picks gemm_neon.cc).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
if(NOT CMAKE_CXX_COMPILER)
  set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
endif()
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
