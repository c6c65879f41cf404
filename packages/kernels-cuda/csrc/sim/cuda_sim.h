// cuda_sim.h: force-included (-include) when the .cu sources are compiled as plain
// C++ for the host (the cuda-sim backend). It maps CUDA's execution model onto the
// CPU: every block runs alone, its threads as fibers on one OS thread; __syncthreads
// and warp exchanges are points where a fiber yields until every live thread of the
// block (or warp) has arrived. Static __shared__ arrays live in one linker section
// whose bytes a kernel writes are poisoned (0xFF: NaN for floats) before each of its
// blocks, as is dynamic shared memory, so a read that a missing barrier leaves
// unordered sees garbage.
// nvcuda::wmma fragments: sim/wmma_sim.h (included by the .cu files that use them).
// mma.sync m16n8k16, ldmatrix and cp.async: sim/mma_sim.h, behind the wrappers of
// mma_ptx.h (warp-collective, PTX fragment layouts; cp.async lands at its wait_group).
// wgmma.mma_async (sm_90a) from shared-memory descriptors: sim/wgmma_sim.h, behind the
// wrappers of wgmma_ptx.h (warpgroup-collective; the products run at the retiring
// wgmma.wait_group, reading shared memory then).
// Not covered: other inline PTX, TMA, grid sync, timing, bank conflicts, and the
// real asynchrony of cp.async (its copies land at a fixed point, the retiring wait).
#pragma once
#define KILN_CUDA_SIM 1

#include <vector_types.h>
#include <driver_types.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <vector>

#undef __global__
#undef __device__
#undef __host__
#undef __forceinline__
#undef __noinline__
#undef __shared__
#undef __launch_bounds__
#undef __restrict__
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
#define __restrict__ __restrict
// One section holds every static __shared__ array of every kernel (one block runs at a time).
#define __shared__ __attribute__((section("kiln_sim_shared"), aligned(16))) static

namespace kiln_sim {

extern thread_local uint3 g_thread_idx;
extern thread_local uint3 g_block_idx;
extern thread_local dim3 g_block_dim;
extern thread_local dim3 g_grid_dim;

/**
 * Runs `body` once per thread of every block of the grid (see sim_scheduler.cc), or,
 * while launches are being recorded, checks the launch and appends it to the recording.
 * `kernel` names the kernel function (the static shared bytes it writes are learnt per kernel).
 */
void launch(const void* kernel, dim3 grid, dim3 block, size_t dynamic_smem_bytes, const std::function<void()>& body);
/** Launches from now on go to `into` instead of running (a CUDA graph); nullptr runs them again. */
void record_launches(std::vector<std::function<void()>>* into);
/** The current block's dynamic shared memory (poisoned at block start). */
void* dynamic_shared_memory();

/** Reports a kernel bug (`what`, with the current block) and aborts. */
[[noreturn]] void fail(const char* what);
/** Block-wide barrier: yields until every live thread of the block arrived (same line, else abort). */
void sync_block(const char* file, int line);
/** Warp-wide barrier over the live lanes of the current warp. */
void sync_warp(const char* file, int line);
/** This thread's 8-byte exchange slot and the slot of `lane` in the same warp. */
uint64_t* warp_slot();
uint64_t* warp_slot_of_lane(unsigned lane);
/** Shuffles use each thread's two slots in turn (every live lane of a warp takes part in each). */
void next_warp_slot();
unsigned lane_id();
/** Bit i set when lane i of the current warp is a live thread. */
unsigned live_lane_mask();

template <typename T>
inline T warp_exchange(T value, unsigned src_lane, const char* file, int line) {
  static_assert(sizeof(T) <= 8, "warp shuffles move at most 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  *warp_slot() = bits;
  sync_warp(file, line);
  uint64_t got = *warp_slot_of_lane(src_lane);
  // One wait, not two: the next shuffle writes the thread's other slot, and this one is
  // written again only two shuffles on, past a wait no lane passes before all have read here.
  next_warp_slot();
  T out;
  std::memcpy(&out, &got, sizeof(T));
  return out;
}

inline unsigned segment_start(unsigned lane, int width) { return lane - lane % static_cast<unsigned>(width); }

template <typename T>
inline T shfl_xor(T v, int lane_mask, int width, const char* f, int l) {
  unsigned lane = lane_id(), src = lane ^ static_cast<unsigned>(lane_mask);
  if (src >= segment_start(lane, width) + static_cast<unsigned>(width)) src = lane;
  return warp_exchange(v, src, f, l);
}
template <typename T>
inline T shfl_down(T v, unsigned delta, int width, const char* f, int l) {
  unsigned lane = lane_id(), src = lane + delta;
  if (src >= segment_start(lane, width) + static_cast<unsigned>(width)) src = lane;
  return warp_exchange(v, src, f, l);
}
template <typename T>
inline T shfl_up(T v, unsigned delta, int width, const char* f, int l) {
  unsigned lane = lane_id();
  unsigned src = (lane - segment_start(lane, width) >= delta) ? lane - delta : lane;
  return warp_exchange(v, src, f, l);
}
template <typename T>
inline T shfl_idx(T v, int src_lane, int width, const char* f, int l) {
  unsigned lane = lane_id();
  return warp_exchange(v, segment_start(lane, width) + static_cast<unsigned>(src_lane) % static_cast<unsigned>(width), f, l);
}
unsigned ballot(bool pred, const char* file, int line);

// Warp-collective matrix instructions (sim/mma_sim.h: mma.sync, ldmatrix) and cp.async.
constexpr unsigned kWideSlotBytes = 64;
/** This thread's 64-byte exchange slot, and that of `lane` in the same warp. */
unsigned char* warp_wide_slot();
const unsigned char* warp_wide_slot_of_lane(unsigned lane);
/**
 * Entry of a warp-collective instruction (`.sync.aligned`): waits for the warp, then
 * aborts unless all 32 lanes are live and wait at this same file:line. Leave with
 * sync_warp(file, line) once the other lanes' slots are read.
 */
void warp_collective(const char* what, const char* file, int line);
/** The current block's shared memory: the static section and the dynamic buffer. */
struct SharedBounds {
  const unsigned char *static_begin, *static_end, *dynamic_begin, *dynamic_end;
};
extern SharedBounds g_shared_bounds;
inline bool is_shared(const void* p, size_t bytes) {
  const auto* c = static_cast<const unsigned char*>(p);
  const SharedBounds& b = g_shared_bounds;
  return (c >= b.static_begin && c + bytes <= b.static_end) || (c >= b.dynamic_begin && c + bytes <= b.dynamic_end);
}
/** Reports a misaligned or (when `shared`) non-shared address of a checked access, then aborts. */
[[noreturn]] void access_fault(const char* what, const void* p, size_t align, bool shared, const char* file, int line);
/** Aborts unless p is `align`-byte aligned and, when `shared`, inside the block's shared memory. */
inline void check_access(const char* what, const void* p, size_t align, bool shared, const char* file, int line) {
  if (reinterpret_cast<uintptr_t>(p) % align != 0 || (shared && !is_shared(p, align))) access_fault(what, p, align, shared, file, line);
}
/**
 * cp.async of 16 bytes: reads src_bytes (<= 16) from src now, zero for the rest, and
 * poisons dst (0xFF); the bytes land in dst only at the cp_async_wait that retires
 * the group they were committed with. __syncthreads does not complete them, and
 * copies outstanding when a thread exits never land. Landed bytes belong to the
 * waiting thread until its block's next __syncthreads: check_landed_visible aborts
 * when another thread reads them before (ldmatrix checks every row it reads).
 */
void cp_async(void* dst, const void* src, unsigned src_bytes, const char* file, int line);
/** Whether any cp.async landed since the block's last __syncthreads (else nothing to check). */
extern bool g_any_landed;
void check_landed_owner(const char* what, const void* p, const char* file, int line);
inline void check_landed_visible(const char* what, const void* p, const char* file, int line) {
  if (g_any_landed) check_landed_owner(what, p, file, line);
}
/** cp.async.commit_group: this thread's copies issued since the last commit form a group. */
void cp_async_commit();
/** cp.async.wait_group: lands this thread's oldest groups until at most `pending` remain. */
void cp_async_wait(unsigned pending);

// Warpgroup-collective wgmma (sim/wgmma_sim.h). A warpgroup is 4 consecutive warps of
// the block starting at a multiple of 128 threads.
/**
 * Entry of a warpgroup-collective instruction: waits for the 128 threads of this
 * thread's warpgroup, then aborts unless all are live and at this same file:line and
 * their 64-byte wide slots (warp_wide_slot) hold the same first `uniform_bytes`
 * bytes. Leave with warpgroup_barrier(file, line).
 */
void warpgroup_collective(const char* what, size_t uniform_bytes, const char* file, int line);
void warpgroup_barrier(const char* file, int line);
/**
 * One wgmma.mma_async of this thread, run at the wgmma.wait_group that retires its
 * group: `run(op)` computes this thread's accumulator fragment from shared memory.
 */
struct WgmmaOp {
  void (*run)(const WgmmaOp& op);
  uint64_t desc_a, desc_b;
  float* d;
  unsigned warpgroup_thread;  // 0..127
  bool scale_d;
  const char* file;
  int line;
  // A from registers (desc_a unused): this thread's two rows of A (16 w + l / 4 + 8 h),
  // gathered from the fragments of its quad at issue.
  float a_rows[2][16];
};
/** Queues op (issued since the last wgmma.commit_group). Aborts when a thread of the block has cp.async bytes landed since its last fence.proxy.async. */
void wgmma_issue(const WgmmaOp& op);
void wgmma_commit();
/** wgmma.wait_group: runs this thread's oldest groups until at most `pending` remain. */
void wgmma_wait(unsigned pending);
/** fence.proxy.async.shared::cta: this thread's landed cp.async bytes may now feed wgmma. */
void fence_proxy_async();

}  // namespace kiln_sim

#define threadIdx (::kiln_sim::g_thread_idx)
#define blockIdx (::kiln_sim::g_block_idx)
#define blockDim (::kiln_sim::g_block_dim)
#define gridDim (::kiln_sim::g_grid_dim)
#define warpSize 32

#define __syncthreads() ::kiln_sim::sync_block(__FILE__, __LINE__)
#define __syncwarp(...) ::kiln_sim::sync_warp(__FILE__, __LINE__)
#define __shfl_xor_sync(mask, v, lm, ...) ::kiln_sim::shfl_xor((v), (lm), kiln_sim_width(__VA_ARGS__), __FILE__, __LINE__)
#define __shfl_down_sync(mask, v, d, ...) ::kiln_sim::shfl_down((v), (d), kiln_sim_width(__VA_ARGS__), __FILE__, __LINE__)
#define __shfl_up_sync(mask, v, d, ...) ::kiln_sim::shfl_up((v), (d), kiln_sim_width(__VA_ARGS__), __FILE__, __LINE__)
#define __shfl_sync(mask, v, src, ...) ::kiln_sim::shfl_idx((v), (src), kiln_sim_width(__VA_ARGS__), __FILE__, __LINE__)
#define __ballot_sync(mask, pred) ::kiln_sim::ballot((pred), __FILE__, __LINE__)
#define __any_sync(mask, pred) (::kiln_sim::ballot((pred), __FILE__, __LINE__) != 0u)
#define __all_sync(mask, pred) (::kiln_sim::ballot((pred), __FILE__, __LINE__) == ::kiln_sim::live_lane_mask())
inline int kiln_sim_width(int w = 32) { return w; }

// Device intrinsics with their host meaning. Blocks and threads never run at the
// same time on the host, so atomics are plain read-modify-writes.
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline float __saturatef(float x) { return x < 0.f ? 0.f : (x > 1.f ? 1.f : x); }
inline float __int_as_float(int x) { float f; std::memcpy(&f, &x, 4); return f; }
inline int __float_as_int(float x) { int i; std::memcpy(&i, &x, 4); return i; }
inline float __uint_as_float(unsigned x) { float f; std::memcpy(&f, &x, 4); return f; }
inline unsigned __float_as_uint(float x) { unsigned i; std::memcpy(&i, &x, 4); return i; }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }
template <typename T> inline T __ldg(const T* p) { return *p; }
template <typename T> inline T atomicAdd(T* p, T v) { T old = *p; *p = old + v; return old; }
template <typename T> inline T atomicMax(T* p, T v) { T old = *p; if (v > old) *p = v; return old; }
template <typename T> inline T atomicMin(T* p, T v) { T old = *p; if (v < old) *p = v; return old; }
template <typename T> inline T atomicOr(T* p, T v) { T old = *p; *p = old | v; return old; }
template <typename T> inline T atomicExch(T* p, T v) { T old = *p; *p = v; return old; }
template <typename T> inline T atomicCAS(T* p, T cmp, T v) { T old = *p; if (old == cmp) *p = v; return old; }
inline void __threadfence() {}
using std::max;
using std::min;
