// embedding.cu: table lookup and its gradient.
//   embeddingForward:  out[i, :] = table[ids[i], :]
//   embeddingBackward: dTable[v, :] += sum over i with ids[i] = v of dOut[i, :]
//                      (the sum in f32, in increasing i, added to the row once)
// Layout: ids i32 (count), each in [0, vocab); table / dTable (vocab, dim) and
// out / dOut (count, dim), row-major, contiguous, in the storage dtype (dTable in
// gradDtype: dOut's dtype, or f32 with a 16-bit dOut).
//
// Forward: a grid-stride copy over (row, 16-byte chunk) when the rows are 16-byte
// aligned, else over single elements.
//
// Backward, deterministic without float atomics: a stable counting sort of the
// positions by id, then one warp per distinct id that sums its dOut rows in position
// order. Six launches, scratch: hist[vocab], cursor[vocab], keys[count] (u64),
// rank[count], perm[count]:
//   1. zero hist                          2. hist[ids[i]] += 1 (integer atomics: order-free)
//   3. cursor = exclusive scan of hist (one block, tiles of 16384 in order)
//   4. per tile of 1024 positions (one block each): bitonic sort of the keys
//      (id << 32 | local position) in shared memory; rank = position - first position of
//      the same id in the sorted tile (binary search), top bit set on a run's last element
//   5. one block walks the tiles in order: perm[cursor[id] + rank] = i, then the run's
//      last element advances cursor[id] by the run length. perm is the positions sorted by
//      (id, i) and afterwards cursor[id] is the end of id's segment.
//   6. grid (sorted position, 128-column chunk): the warp at the first position of a
//      segment sums dOut[perm[k], cols] for k over the segment, in order, in f32
//      registers (4 columns per lane; the segment's rows 8 at a time, loaded before they
//      are added), then dTable[id, cols] += sum. One writer per row.
#include "kiln_cuda.h"

namespace kiln {
namespace {

constexpr int kThreads = 256;

// ---------------------------------------------------------------- forward

template <typename V>
__global__ void __launch_bounds__(kThreads) embedding_forward_kernel(const int32_t* ids, const V* table, V* out, int64_t count, int64_t row_units) {
  const int64_t total = count * row_units;
  for (int64_t u = blockIdx.x * int64_t{kThreads} + threadIdx.x; u < total; u += int64_t{gridDim.x} * kThreads) {
    const int64_t i = u / row_units, c = u - i * row_units;
    out[u] = table[static_cast<int64_t>(ids[i]) * row_units + c];
  }
}

// embeddingForward: ids, table, out | count, vocab, dim, dtype
void launch_embedding_forward(const KernelCall& c) {
  const int64_t count = c.i64(3), dim = c.i64(5);
  dispatch_float(c.i32(6), "embeddingForward", [&](auto tag) {
    using T = decltype(tag);
    const int32_t* ids = c.ptr<const int32_t>(0);
    const T* table = c.ptr<const T>(1);
    T* out = c.ptr<T>(2);
    const int64_t row_bytes = dim * static_cast<int64_t>(sizeof(T));
    const bool vec = row_bytes % 16 == 0 && is_aligned16(table) && is_aligned16(out);
    if (vec) {
      const int64_t units = row_bytes / 16;
      launch("embeddingForward", embedding_forward_kernel<uint4>, grid_stride_blocks(count * units, kThreads), kThreads, 0, c.stream, ids, reinterpret_cast<const uint4*>(table),
             reinterpret_cast<uint4*>(out), count, units);
    } else {
      launch("embeddingForward", embedding_forward_kernel<T>, grid_stride_blocks(count * dim, kThreads), kThreads, 0, c.stream, ids, table, out, count, dim);
    }
  });
}

// ---------------------------------------------------------------- backward

constexpr int kTile = 1024;           // positions per sorted tile
constexpr int kSortThreads = kTile / 2;
constexpr int kScanThreads = 1024;
constexpr int kScanPer = 16;          // hist entries per scan thread per step (a vocabulary of 50257 in 4 steps)
constexpr int kColsPerLane = 4;
constexpr int kRowsInFlight = 8;      // rows of a segment loaded before any is added (a divisor of 32)
constexpr int kColsPerWarp = 32 * kColsPerLane;
constexpr int kAccWarps = kThreads / 32;
constexpr uint32_t kLastBit = 0x80000000u;

__global__ void __launch_bounds__(kThreads) zero_ints_kernel(int32_t* p, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < n; i += int64_t{gridDim.x} * kThreads) p[i] = 0;
}

__global__ void __launch_bounds__(kThreads) histogram_kernel(const int32_t* ids, int64_t count, int32_t* hist) {
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < count; i += int64_t{gridDim.x} * kThreads) atomicAdd(&hist[ids[i]], 1);
}

/** Inclusive warp scan of integers. */
__device__ __forceinline__ int32_t warp_inclusive_scan(int32_t v) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const int32_t o = __shfl_up_sync(0xffffffffu, v, d);
    if (lane >= d) v += o;
  }
  return v;
}

/** cursor[v] = sum of hist[0..v): one block of kScanThreads, steps of kScanThreads * kScanPer entries. */
__global__ void __launch_bounds__(kScanThreads) exclusive_scan_kernel(const int32_t* hist, int32_t* cursor, int64_t n) {
  __shared__ int32_t warp_totals[kScanThreads / 32];
  __shared__ int32_t step_total;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int32_t carry = 0;
  for (int64_t base = 0; base < n; base += int64_t{kScanThreads} * kScanPer) {
    const int64_t i0 = base + int64_t{threadIdx.x} * kScanPer;
    int32_t v[kScanPer];
    int32_t local = 0;
#pragma unroll
    for (int k = 0; k < kScanPer; k++) {
      v[k] = i0 + k < n ? hist[i0 + k] : 0;
      local += v[k];
    }
    const int32_t incl = warp_inclusive_scan(local);
    if (lane == 31) warp_totals[warp] = incl;
    __syncthreads();
    if (warp == 0) {
      const int32_t t = warp_totals[lane];
      const int32_t s = warp_inclusive_scan(t);
      warp_totals[lane] = s - t;  // exclusive prefix of the warps
      if (lane == 31) step_total = s;
    }
    __syncthreads();
    int32_t run = carry + warp_totals[warp] + incl - local;
#pragma unroll
    for (int k = 0; k < kScanPer; k++) {
      if (i0 + k < n) cursor[i0 + k] = run;
      run += v[k];
    }
    carry += step_total;
    __syncthreads();  // warp_totals / step_total are rewritten by the next step
  }
}

/** Sorts one tile's keys (id << 32 | local position) and writes them with their run ranks. */
__global__ void __launch_bounds__(kSortThreads) tile_sort_kernel(const int32_t* ids, int64_t count, uint64_t* keys, uint32_t* rank) {
  __shared__ uint64_t s[kTile];
  const int64_t base = int64_t{blockIdx.x} * kTile;
  for (int p = threadIdx.x; p < kTile; p += kSortThreads) {
    const int64_t i = base + p;
    s[p] = i < count ? (static_cast<uint64_t>(static_cast<uint32_t>(ids[i])) << 32) | static_cast<uint32_t>(p) : ~uint64_t{0};
  }
  __syncthreads();
  for (int k = 2; k <= kTile; k <<= 1) {
    for (int j = k >> 1; j > 0; j >>= 1) {
      const int t = threadIdx.x;
      const int a = (t / j) * 2 * j + (t % j), b = a + j;
      const uint64_t x = s[a], y = s[b];
      const bool ascending = (a & k) == 0;
      if ((x > y) == ascending) {
        s[a] = y;
        s[b] = x;
      }
      __syncthreads();
    }
  }
  for (int p = threadIdx.x; p < kTile; p += kSortThreads) {
    const int64_t i = base + p;
    if (i >= count) continue;
    const uint64_t key = s[p];
    const uint32_t id = static_cast<uint32_t>(key >> 32);
    // First position of this id in the sorted tile: lower bound of (id << 32).
    const uint64_t lo_key = static_cast<uint64_t>(id) << 32;
    int lo = 0, hi = p;
    while (lo < hi) {
      const int mid = (lo + hi) >> 1;
      if (s[mid] < lo_key) lo = mid + 1;
      else hi = mid;
    }
    const bool last = p == kTile - 1 || static_cast<uint32_t>(s[p + 1] >> 32) != id;
    keys[i] = key;
    rank[i] = static_cast<uint32_t>(p - lo) | (last ? kLastBit : 0u);
  }
}

/** One block of kTile threads; tiles in order: perm[cursor[id] + rank] = i, then cursor[id] += run length. */
__global__ void __launch_bounds__(kTile) place_kernel(const uint64_t* keys, const uint32_t* rank, int64_t count, int32_t* cursor, int32_t* perm) {
  const int64_t tiles = (count + kTile - 1) / kTile;
  int64_t i = threadIdx.x;
  uint64_t key = i < count ? keys[i] : 0;
  uint32_t rk = i < count ? rank[i] : 0;
  for (int64_t tile = 0; tile < tiles; tile++) {
    const bool valid = i < count;
    const int64_t next_i = i + kTile;
    // Prefetch the next tile's entry (independent of cursor).
    const uint64_t next_key = next_i < count ? keys[next_i] : 0;
    const uint32_t next_rk = next_i < count ? rank[next_i] : 0;
    int32_t id = 0, pos = 0;
    if (valid) {
      id = static_cast<int32_t>(key >> 32);
      pos = cursor[id] + static_cast<int32_t>(rk & ~kLastBit);
      perm[pos] = static_cast<int32_t>(tile * kTile + static_cast<int64_t>(key & 0xffffffffu));
    }
    __syncthreads();  // every read of cursor for this tile happens before the updates
    if (valid && (rk & kLastBit)) cursor[id] = pos + 1;
    __syncthreads();
    i = next_i;
    key = next_key;
    rk = next_rk;
  }
}

/**
 * Block: kAccWarps sorted positions x one chunk of kColsPerWarp columns; the warp at a
 * segment start sums it. The segment's positions come 32 at a time (one coalesced load,
 * lane l holding the l-th), and its rows kRowsInFlight at a time: all of a group's loads
 * are issued before any is added, so a long segment (a frequent token's hundreds of rows)
 * waits on one memory latency per group instead of two per row. The adds keep the order
 * of the positions.
 */
template <typename T, typename G>
__global__ void __launch_bounds__(kThreads) accumulate_kernel(const int32_t* ids, const int32_t* perm, const int32_t* cursor, const T* dout, G* dtable, int64_t count,
                                                             int64_t dim) {
  const int lane = threadIdx.x & 31;
  const int64_t p = int64_t{blockIdx.x} * kAccWarps + (threadIdx.x >> 5);
  if (p >= count) return;
  const int32_t id = ids[perm[p]];
  if (p > 0 && ids[perm[p - 1]] == id) return;  // not the first position of its id
  const int64_t end = cursor[id];
  const int64_t c0 = int64_t{blockIdx.y} * kColsPerWarp + lane;
  float acc[kColsPerLane];
#pragma unroll
  for (int j = 0; j < kColsPerLane; j++) acc[j] = 0.f;
  // Every lane of the warp runs these loops alike (p and end are the warp's): the shuffles see all 32.
  for (int64_t k0 = p; k0 < end; k0 += 32) {
    const int n = end - k0 < 32 ? static_cast<int>(end - k0) : 32;
    const int32_t mine = lane < n ? perm[k0 + lane] : 0;
    for (int r0 = 0; r0 < n; r0 += kRowsInFlight) {
      float v[kRowsInFlight][kColsPerLane];
#pragma unroll
      for (int r = 0; r < kRowsInFlight; r++) {
        const int32_t pos = __shfl_sync(0xffffffffu, mine, r0 + r);
        const T* src = dout + static_cast<int64_t>(pos) * dim;
#pragma unroll
        for (int j = 0; j < kColsPerLane; j++) {
          const int64_t col = c0 + 32 * j;
          v[r][j] = r0 + r < n && col < dim ? to_f32(src[col]) : 0.f;
        }
      }
#pragma unroll
      for (int r = 0; r < kRowsInFlight; r++) {
        if (r0 + r < n) {
#pragma unroll
          for (int j = 0; j < kColsPerLane; j++) acc[j] += v[r][j];
        }
      }
    }
  }
  G* dst = dtable + static_cast<int64_t>(id) * dim;
#pragma unroll
  for (int j = 0; j < kColsPerLane; j++) {
    const int64_t col = c0 + 32 * j;
    if (col < dim) dst[col] = from_f32<G>(to_f32(dst[col]) + acc[j]);
  }
}

size_t align_up(size_t x) { return (x + 255) & ~size_t{255}; }

// embeddingBackward: ids, dOut, dTable | count, vocab, dim, dtype, gradDtype (dTable's)
void launch_embedding_backward(const KernelCall& c) {
  const int64_t count = c.i64(3), vocab = c.i64(4), dim = c.i64(5);
  dispatch_float_grad(c.i32(6), c.i32(7), "embeddingBackward", [&](auto tag, auto grad_tag) {
    using T = decltype(tag);
    using G = decltype(grad_tag);
    const int32_t* ids = c.ptr<const int32_t>(0);
    const T* dout = c.ptr<const T>(1);
    G* dtable = c.ptr<G>(2);
    const int64_t tiles = (count + kTile - 1) / kTile;
    const size_t hist_bytes = align_up(sizeof(int32_t) * vocab);
    const size_t keys_bytes = align_up(sizeof(uint64_t) * count);
    const size_t rank_bytes = align_up(sizeof(uint32_t) * count);
    const size_t perm_bytes = align_up(sizeof(int32_t) * count);
    char* scratch = static_cast<char*>(c.scratch(2 * hist_bytes + keys_bytes + rank_bytes + perm_bytes));
    int32_t* hist = reinterpret_cast<int32_t*>(scratch);
    int32_t* cursor = reinterpret_cast<int32_t*>(scratch + hist_bytes);
    uint64_t* keys = reinterpret_cast<uint64_t*>(scratch + 2 * hist_bytes);
    uint32_t* rank = reinterpret_cast<uint32_t*>(scratch + 2 * hist_bytes + keys_bytes);
    int32_t* perm = reinterpret_cast<int32_t*>(scratch + 2 * hist_bytes + keys_bytes + rank_bytes);
    const char* name = "embeddingBackward";
    launch(name, zero_ints_kernel, grid_stride_blocks(vocab, kThreads), kThreads, 0, c.stream, hist, vocab);
    launch(name, histogram_kernel, grid_stride_blocks(count, kThreads), kThreads, 0, c.stream, ids, count, hist);
    launch(name, exclusive_scan_kernel, 1, kScanThreads, 0, c.stream, static_cast<const int32_t*>(hist), cursor, vocab);
    launch(name, tile_sort_kernel, static_cast<unsigned>(tiles), kSortThreads, 0, c.stream, ids, count, keys, rank);
    launch(name, place_kernel, 1, kTile, 0, c.stream, static_cast<const uint64_t*>(keys), static_cast<const uint32_t*>(rank), count, cursor, perm);
    const dim3 grid(static_cast<unsigned>((count + kAccWarps - 1) / kAccWarps), static_cast<unsigned>((dim + kColsPerWarp - 1) / kColsPerWarp));
    launch(name, accumulate_kernel<T, G>, grid, kThreads, 0, c.stream, ids, static_cast<const int32_t*>(perm), static_cast<const int32_t*>(cursor), dout, dtable, count, dim);
  });
}

}  // namespace

KILN_REGISTER_KERNEL("embeddingForward", launch_embedding_forward);
KILN_REGISTER_KERNEL("embeddingBackward", launch_embedding_backward);

}  // namespace kiln
