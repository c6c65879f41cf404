// wmma_sim.h: nvcuda::wmma (16x16x16 fragments) for the simulator. A fragment
// holds the whole 16x16 tile in every lane (real hardware spreads it over the
// warp in an unspecified order, so code may only touch x[] element-wise, which
// holds here too). Every operation is warp-collective: it waits for all live lanes
// of the warp on entry, so a divergent call or a lane that skips one aborts like a
// divergent __syncwarp. Loads fill the whole tile in each lane; mma_sync computes
// only this lane's share of the accumulator (the elements an sm_80 lane holds: rows
// g and g + 8, columns 2q, 2q + 1, 2q + 8, 2q + 9, g = lane / 4, q = lane % 4) and
// sets the rest to NaN, which element-wise code may touch but no store writes out; a
// store writes only this lane's share and does not wait afterwards, so reading
// another lane's part before a __syncwarp sees poison.
// mma_sync accumulates in f32 in k order.
#pragma once
#include <limits>
#include <type_traits>

namespace nvcuda {
namespace wmma {

struct row_major {};
struct col_major {};
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
enum layout_t { mem_row_major, mem_col_major };

template <typename Use, int M, int N, int K, typename T, typename Layout = void>
struct fragment {
  static_assert(M == 16 && N == 16 && K == 16, "the simulator has 16x16x16 fragments only");
  static constexpr int rows = 16, cols = 16;
  static constexpr int num_elements = rows * cols;
  T x[num_elements];  // element (r, c) at r * 16 + c
};

namespace detail {
inline void enter(const char* what) { ::kiln_sim::sync_warp(what, 0); }
/** The 8 accumulator elements (r * 16 + c) this lane holds on sm_80+ (two m16n8 accumulators). */
inline void lane_share(int (&e)[8]) {
  const int lane = static_cast<int>(::kiln_sim::lane_id()), g = lane / 4, q = lane % 4, cols[4] = {2 * q, 2 * q + 1, 2 * q + 8, 2 * q + 9};
  for (int h = 0; h < 2; h++)
    for (int j = 0; j < 4; j++) e[4 * h + j] = (g + 8 * h) * 16 + cols[j];
}
inline float f32(float v) { return v; }
inline float f32(__half v) { return __half2float(v); }
inline float f32(__nv_bfloat16 v) { return __bfloat162float(v); }
}  // namespace detail

template <typename Use, typename T, typename Layout>
inline void load_matrix_sync(fragment<Use, 16, 16, 16, T, Layout>& f, const T* p, unsigned ldm) {
  static_assert(!std::is_same<Use, accumulator>::value, "accumulators load with a layout_t");
  detail::enter("wmma::load_matrix_sync");
  constexpr bool row = std::is_same<Layout, row_major>::value;
  for (int r = 0; r < 16; r++)
    for (int c = 0; c < 16; c++) f.x[r * 16 + c] = row ? p[r * ldm + c] : p[c * ldm + r];
}

template <typename T>
inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, T>& f, const T* p, unsigned ldm, layout_t layout) {
  detail::enter("wmma::load_matrix_sync");
  for (int r = 0; r < 16; r++)
    for (int c = 0; c < 16; c++) f.x[r * 16 + c] = layout == mem_row_major ? p[r * ldm + c] : p[c * ldm + r];
}

template <typename T>
inline void store_matrix_sync(T* p, const fragment<accumulator, 16, 16, 16, T>& f, unsigned ldm, layout_t layout) {
  detail::enter("wmma::store_matrix_sync");
  int share[8];
  detail::lane_share(share);
  for (int e : share) {
    const int r = e / 16, c = e % 16;
    (layout == mem_row_major ? p[r * ldm + c] : p[c * ldm + r]) = f.x[e];
  }
}

template <typename Use, typename T, typename Layout, typename V>
inline void fill_fragment(fragment<Use, 16, 16, 16, T, Layout>& f, V v) {
  for (int e = 0; e < 256; e++) f.x[e] = static_cast<T>(v);
}

template <typename T, typename LA, typename LB>
inline void mma_sync(fragment<accumulator, 16, 16, 16, float>& d, const fragment<matrix_a, 16, 16, 16, T, LA>& a, const fragment<matrix_b, 16, 16, 16, T, LB>& b,
                     const fragment<accumulator, 16, 16, 16, float>& c) {
  detail::enter("wmma::mma_sync");
  int share[8];
  detail::lane_share(share);
  float out[8];
  for (int s = 0; s < 8; s++) {
    const int i = share[s] / 16, j = share[s] % 16;
    float acc = c.x[share[s]];
    for (int q = 0; q < 16; q++) acc += detail::f32(a.x[i * 16 + q]) * detail::f32(b.x[q * 16 + j]);
    out[s] = acc;
  }
  for (int e = 0; e < 256; e++) d.x[e] = std::numeric_limits<float>::quiet_NaN();
  for (int s = 0; s < 8; s++) d.x[share[s]] = out[s];
}

}  // namespace wmma
}  // namespace nvcuda
