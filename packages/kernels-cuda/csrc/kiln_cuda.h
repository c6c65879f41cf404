// kiln_cuda.h: what every kernel family file shares: storage dtypes (f32, bf16,
// f16 in memory; f32 in registers), the launch helper that is <<<>>> under nvcc and
// the simulator on the host, and the host-side call record a launcher reads its
// operands from.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#if !defined(KILN_CUDA_SIM)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#else
#include "sim/sim_options.h"
#endif
#include "runtime/sizing_call.h"

namespace kiln {

/** Storage dtype codes; the TypeScript side sends the same numbers (src/kernel-call.ts). */
enum DType : int { kF32 = 0, kBF16 = 1, kF16 = 2, kI32 = 3, kU32 = 4, kU16 = 5 };

// Host and device: launchers convert scalars (fill's value) on the host, and nvcc
// compiles a host call of a __device__-only function into a stub that exits.
__host__ __device__ __forceinline__ float to_f32(float x) { return x; }
__host__ __device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }
__host__ __device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }

template <typename T> __host__ __device__ __forceinline__ T from_f32(float x);
template <> __host__ __device__ __forceinline__ float from_f32<float>(float x) { return x; }
template <> __host__ __device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
template <> __host__ __device__ __forceinline__ __half from_f32<__half>(float x) { return __float2half_rn(x); }

/** Dynamic shared memory as `T* name` (one untyped array, so templates do not clash). */
#if defined(KILN_CUDA_SIM)
#define KILN_DYNAMIC_SHARED(T, name) T* name = static_cast<T*>(::kiln_sim::dynamic_shared_memory())
#else
#define KILN_DYNAMIC_SHARED(T, name) \
  extern __shared__ __align__(16) unsigned char kiln_dynamic_smem[]; \
  T* name = reinterpret_cast<T*>(kiln_dynamic_smem)
#endif

/** Opts a kernel into more than 48 KiB of dynamic shared memory (real device only). */
template <typename K>
void allow_shared(K* kernel, size_t bytes) {
#if !defined(KILN_CUDA_SIM)
  if (bytes > 48 * 1024) cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
#else
  (void)kernel;
  (void)bytes;
#endif
}

/** Throws KernelLaunchError after a failed launch (real device only). */
void check_launch(const char* kernel);

#if defined(__CUDACC__) || defined(KILN_CUDA_SIM)
/** Enqueues `kernel` on `stream`; under the simulator it runs at once on the host. */
template <typename... KArgs, typename... Args>
inline void launch(const char* name, void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, Args... args) {
  if (sizing_call()) return;
#if defined(KILN_CUDA_SIM)
  (void)name;
  (void)stream;
  // By value: a recorded launch (a graph) runs after this call has returned.
  ::kiln_sim::launch(reinterpret_cast<const void*>(kernel), grid, block, smem, [=]() { kernel(static_cast<KArgs>(args)...); });
#else
  kernel<<<grid, block, smem, stream>>>(static_cast<KArgs>(args)...);
  check_launch(name);
#endif
}
#endif

inline unsigned ceil_div(size_t a, size_t b) { return static_cast<unsigned>((a + b - 1) / b); }

/**
 * The most blocks a launch may have along grid.y (and z): 65535 on every GPU. A kernel
 * whose y walks a count that can pass it splits the launch (see ssd.cu); the simulator
 * can report a lower figure so that tests reach the split with small shapes.
 */
inline int64_t max_grid_y() {
#if defined(KILN_CUDA_SIM)
  return ::kiln_sim::options().max_grid_y;
#else
  return 65535;
#endif
}

/** Blocks of `threads` for a grid-stride loop over `work` items: at least 1, at most 65535 * 8 (the loop covers the rest). */
inline unsigned grid_stride_blocks(int64_t work, int threads) {
  int64_t blocks = (work + threads - 1) / threads;
  if (blocks < 1) blocks = 1;
  return static_cast<unsigned>(blocks < 65535 * 8 ? blocks : 65535 * 8);
}

__host__ __device__ __forceinline__ bool is_aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

/**
 * The block tile of the pipelined bf16/f16 matmuls (mma.sync: 128x128 or 64x64; wgmma:
 * 128x256 or 128x128): by default the larger where it makes at least 128 tiles, else the
 * smaller; KILN_MATMUL_TILES=large or small picks one for every call (to compare them).
 */
enum class MatmulTiles { ByCount, Large, Small };

/**
 * One kernel call from JavaScript: the operands' device addresses in the order of
 * the contract's kernel spec (0 for an absent optional operand), then the kernel's
 * scalars in the order src/kernel-call.ts writes them, all as doubles.
 */
struct KernelCall {
  const double* values;
  int count;
  cudaStream_t stream;
  /** Device scratch of at least `bytes`, valid until the next call asks for scratch. */
  void* (*scratch_fn)(void* owner, size_t bytes);
  void* scratch_owner;
  /** The device's cuBLASLt (a CublasLt*, csrc/blas) when matmuls go through it; null otherwise. */
  void* blas;
  /** KILN_MATMUL_PATH=simt / KILN_ATTENTION_PATH=simt when the device was opened: CUDA-core kernels for 16-bit too. */
  bool simt_matmul;
  bool simt_attention;
  /** KILN_MATMUL_PATH=wmma: bf16/f16 dense matmuls on the WMMA kernel instead of the pipelined mma one. */
  bool wmma_matmul;
  /** KILN_ATTENTION_PATH=wmma: the bf16/f16 attention forward on the WMMA kernel instead of the mma one. */
  bool wmma_attention;
  /** bf16/f16 dense matmuls on the wgmma kernel (matmul_wgmma.cu): an sm_90 device with this build's sm_90a code unless KILN_MATMUL_PATH=mma/wmma/simt; the simulator with KILN_MATMUL_PATH=wgmma. */
  bool wgmma_matmul;
  /** KILN_MATMUL_TILES: the block tile of the pipelined bf16/f16 matmuls (matmul_params.h). */
  MatmulTiles matmul_tiles;
  /** bf16/f16 attention on the wgmma kernels where they apply: an sm_90 device with this build's sm_90a code unless KILN_ATTENTION_PATH=mma/wmma/simt; the simulator with KILN_ATTENTION_PATH=wgmma. */
  bool wgmma_attention;
  /** KILN_ATTENTION_WGMMA_ROWS (64, the default, or 128): query or key rows a block of the wgmma attention owns. */
  int wgmma_attention_rows;
  /** KILN_ATTENTION_MMA_KEYS (32 or 64; default_mma_attention_keys when unset): keys a loop tile of the mma.sync attention forward holds for heads up to 64. */
  int mma_attention_keys;
  /** Unless KILN_ATTENTION_DQ=recompute: the mma.sync backward's dK/dV pass stores dS and the dQ pass multiplies it by K (heads up to 64). */
  bool dq_from_stored_ds;
  /** The most dynamic shared memory one block may opt into on this device (bytes). */
  size_t shared_per_block;

  double at(int i) const;
  template <typename T> T* ptr(int i) const { return reinterpret_cast<T*>(static_cast<uintptr_t>(at(i))); }
  int64_t i64(int i) const { return static_cast<int64_t>(at(i)); }
  int i32(int i) const { return static_cast<int>(at(i)); }
  float f32(int i) const { return static_cast<float>(at(i)); }
  bool flag(int i) const { return at(i) != 0; }
  void* scratch(size_t bytes) const { return scratch_fn(scratch_owner, bytes); }
};

using Launcher = void (*)(const KernelCall&);

/** Adds `fn` to the kernel table under the contract's kernel name. */
struct KernelRegistration {
  KernelRegistration(const char* name, Launcher fn);
};
Launcher find_kernel(const std::string& name);
std::vector<std::string> kernel_names();

[[noreturn]] void throw_bad_dtype(const char* kernel, int dtype);

/**
 * The mma.sync attention forward's key tile at heads up to 64 when KILN_ATTENTION_MMA_KEYS
 * is unset: 64 where an SM's shared memory holds two blocks of it, as on an A100 or H100;
 * 32 otherwise (the consumer GPUs' 100 KiB, where tiles of 32 keep two blocks an SM).
 */
int default_mma_attention_keys(size_t shared_memory_per_sm);

/** Calls f(T{}) with T the C++ storage type of a float dtype code. */
template <typename F>
inline void dispatch_float(int dtype, const char* kernel, F&& f) {
  switch (dtype) {
    case kF32: f(float{}); return;
    case kBF16: f(__nv_bfloat16{}); return;
    case kF16: f(__half{}); return;
    default: throw_bad_dtype(kernel, dtype);
  }
}

/**
 * Calls f(T{}, G{}) for a kernel that writes parameter gradients: T the storage type of
 * its inputs (dtype), G that of the gradients it accumulates into (grad_dtype). G is T,
 * or f32 with 16-bit inputs (mixed precision keeps parameter gradients in f32).
 */
template <typename F>
inline void dispatch_float_grad(int dtype, int grad_dtype, const char* kernel, F&& f) {
  if (grad_dtype == dtype) {
    dispatch_float(dtype, kernel, [&](auto tag) { f(tag, tag); });
    return;
  }
  if (grad_dtype != kF32) throw_bad_dtype(kernel, grad_dtype);
  switch (dtype) {
    case kBF16: f(__nv_bfloat16{}, float{}); return;
    case kF16: f(__half{}, float{}); return;
    default: throw_bad_dtype(kernel, dtype);
  }
}

}  // namespace kiln

#define KILN_REGISTER_KERNEL(name, fn) static ::kiln::KernelRegistration kiln_registration_##fn(name, fn)
