#!/usr/bin/env bash
# Installs what kiln needs on a fresh Debian/Ubuntu machine with Node >= 20 and
# git, then builds every package. Safe to run again; skips what is present.
set -euo pipefail
cd "$(dirname "$0")/.."
export TURBO_TELEMETRY_DISABLED=1 DO_NOT_TRACK=1

PNPM_VERSION=10.34.8

fail() { echo "bootstrap: $*" >&2; exit 1; }

# install_apt WHAT PKG...: installs the Debian packages when running as root, else stops naming them.
install_apt() {
  local what=$1
  shift
  [ $# -gt 0 ] || return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "bootstrap: installing $* ($what) with apt-get"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
  else
    fail "missing $* ($what); install with: sudo apt-get install $*"
  fi
}

node_major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null) || fail "Node.js is not installed; install Node >= 20 first"
[ "$node_major" -ge 20 ] || fail "Node $(node -v) is too old; kiln needs Node >= 20"

if ! command -v pnpm >/dev/null 2>&1 || [ "$(pnpm --version)" != "$PNPM_VERSION" ]; then
  echo "bootstrap: installing pnpm $PNPM_VERSION"
  npm install -g "pnpm@$PNPM_VERSION" >/dev/null 2>&1 \
    || fail "could not install pnpm with 'npm install -g pnpm@$PNPM_VERSION'; run it with the rights to write npm's global prefix"
fi

# The WebAssembly kernels build with clang-16 and its wasm-ld (relaxed and plain SIMD).
missing=()
command -v clang-16 >/dev/null 2>&1 || missing+=(clang-16)
[ -x /usr/lib/llvm-16/bin/wasm-ld ] || missing+=(lld-16)
install_apt "the WebAssembly kernel toolchain" "${missing[@]}"

# Gloo (the gloo sync backend of @kiln/distributed, multi-machine CPU training) is optional:
# installed when possible, else the package builds without it and says so.
if [ ! -f /usr/include/gloo/allreduce.h ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "bootstrap: installing libgloo-dev (Gloo, for --sync-backend gloo) with apt-get"
    (apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libgloo-dev >/dev/null) \
      || echo "bootstrap: could not install libgloo-dev, so --sync-backend gloo will be unavailable"
  else
    echo "bootstrap: libgloo-dev is not installed, so --sync-backend gloo will be unavailable (sudo apt-get install libgloo-dev)"
  fi
fi

# On x86-64 the arm64 build of the native kernels (NEON) is checked by cross-compiling it,
# and its kernels run under qemu-user (packages/kernels-wasm/test/native-arm64-build.test.ts): optional, the test
# skips what is missing and says why.
cross=()
if [ "$(uname -m)" = x86_64 ]; then
  command -v aarch64-linux-gnu-g++ >/dev/null 2>&1 || cross+=(g++-aarch64-linux-gnu)
  command -v qemu-aarch64 >/dev/null 2>&1 || cross+=(qemu-user)
fi
if [ ${#cross[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "bootstrap: installing ${cross[*]} (the arm64 build check) with apt-get"
    (apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${cross[@]}" >/dev/null) \
      || echo "bootstrap: could not install ${cross[*]}, so the arm64 build check will be skipped"
  else
    echo "bootstrap: ${cross[*]} not installed, so the arm64 build check will be skipped (sudo apt-get install ${cross[*]})"
  fi
fi

echo "bootstrap: installing JavaScript dependencies"
pnpm install --frozen-lockfile --reporter=silent
echo "bootstrap: building"
pnpm turbo run build --output-logs=errors-only
echo "bootstrap: ready"
