/*
 * ceiling: register-only f32x4 multiply-add throughput, the upper bound any
 * kernel in this build can reach on one core.
 *
 *   acc_j = acc_j * x + y   for j in 0..ACC-1, `iterations` times
 *
 * ACC independent chains hide the madd latency; nothing touches memory in
 * the loop. Flops per call per thread = iterations * ACC * 4 lanes * 2.
 * Each thread writes the sum of its lanes to out[thread] so the loop is live.
 */
#include "kiln_simd.h"

#define ACC 12

typedef struct {
  int32_t iterations;
  float* out; /* nthreads floats */
} CeilingArgs;

KILN_EXPORT(kiln_ceiling_chains)
uint32_t kiln_ceiling_chains(void) { return ACC; }

KILN_EXPORT(kiln_ceiling_madd)
void kiln_ceiling_madd(const CeilingArgs* g, int thread, int nthreads) {
  (void)nthreads;
  const v128_t x = wasm_f32x4_splat(0.999999f);
  const v128_t y = wasm_f32x4_splat(1e-6f);
  v128_t acc[ACC];
  for (int j = 0; j < ACC; j++) acc[j] = wasm_f32x4_splat((float)j);
  for (int i = 0; i < g->iterations; i++) {
    for (int j = 0; j < ACC; j++) acc[j] = KILN_MADD(y, acc[j], x);
  }
  v128_t sum = acc[0];
  for (int j = 1; j < ACC; j++) sum = wasm_f32x4_add(sum, acc[j]);
  g->out[thread] = wasm_f32x4_extract_lane(sum, 0) + wasm_f32x4_extract_lane(sum, 1) +
                   wasm_f32x4_extract_lane(sum, 2) + wasm_f32x4_extract_lane(sum, 3);
}
