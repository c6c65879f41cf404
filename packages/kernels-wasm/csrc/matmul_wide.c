/*
 * matmul with 16-bit A, B and bias and an f32 C (parameter gradients kept in
 * f32 in mixed precision; MatmulArgs.c_f32): the rectangles of matmul.c's
 * 16-bit path with C read and written as f32, never rounded to 16 bits.
 * Apart from matmul.c so that its 16-bit-C code stays as it was.
 */
#include "matmul_half.h"

void kiln_gemm_rect_bf16_c_f32(const MatmulArgs* g, const uint16_t* a, const uint16_t* b, void* c, int m0, int m1,
                               int n0, int n1, const Scratch* s) {
  gemm_rect_half(g, a, b, c, m0, m1, n0, n1, s, KILN_DT_BF16, KILN_DT_F32);
}

void kiln_gemm_rect_f16_c_f32(const MatmulArgs* g, const uint16_t* a, const uint16_t* b, void* c, int m0, int m1,
                              int n0, int n1, const Scratch* s) {
  gemm_rect_half(g, a, b, c, m0, m1, n0, n1, s, KILN_DT_F16, KILN_DT_F32);
}
