/*
 * activation: element-wise GELU (tanh approximation), SiLU, SwiGLU and GeGLU, forward and backward.
 *
 *   gelu(x)  = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3)
 *            = x * sigmoid(z),       z = 2u
 *   gelu'(x) = s + x s (1 - s) z'(x),  s = sigmoid(z),  z' = 2 sqrt(2/pi) (1 + 3 * 0.044715 x^2)
 *   silu(x)  = x * s,  silu'(x) = s (1 + x (1 - s)),  s = sigmoid(x)
 *   swiglu:  out = silu(gate) * up;  dGate = dOut * up * silu'(gate),  dUp = dOut * silu(gate)
 *   geglu:   the same with gelu in place of silu (Gemma's MLP)
 *
 * Using 0.5 (1 + tanh(u)) = sigmoid(2u) avoids the cancellation of 1 + tanh near
 * tanh = -1. The sigmoid is evaluated from e = exp(-|z|) <= 1, which never
 * overflows:  z >= 0: s = 1 / (1 + e), 1 - s = e s;  z < 0: s = e / (1 + e), 1 - s = 1 / (1 + e).
 * exp is kiln_exp_f32x4 (kiln_math.h, within 1 ulp); it returns 0 below -87.68
 * (subnormals from -87.34), so s saturates to exactly 0 or 1 for large |z|.
 *
 * Layout: every operand is n contiguous elements of the storage dtype
 * (f32, bf16 or f16); compute in f32 (bf16 / f16 blocks are widened to f32 on
 * the stack first). Out-of-place or in place (out over x, dX over dOut): each
 * group of elements is read before it is written. Threads take contiguous
 * ranges of whole 16-element blocks.
 */
#include "kiln_math.h"
#include "kiln_storage.h"

typedef struct {
  int32_t n;
  int32_t dtype;        /* KILN_DT_F32, KILN_DT_BF16, KILN_DT_F16 */
  const void* in0;      /* x (gelu, silu) or gate (swiglu, geglu) */
  const void* in1;      /* dOut (gelu, silu backward) or up (swiglu, geglu) */
  const void* in2;      /* dOut (swiglu, geglu backward) */
  void* out0;           /* out, dX, or dGate */
  void* out1;           /* dUp (swiglu, geglu backward) */
} ActivationArgs;

typedef struct {
  v128_t s;   /* sigmoid(z) */
  v128_t s1;  /* 1 - sigmoid(z) */
} Sigmoid;

KILN_INLINE Sigmoid sigmoid(v128_t z) {
  const v128_t e = kiln_exp_f32x4(wasm_v128_or(z, wasm_f32x4_splat(-0.0f))); /* e^-|z| */
  const v128_t q = wasm_f32x4_div(wasm_f32x4_splat(1.0f), wasm_f32x4_add(wasm_f32x4_splat(1.0f), e));
  const v128_t eq = wasm_f32x4_mul(e, q);
  const v128_t negative = wasm_f32x4_lt(z, wasm_f32x4_splat(0.0f));
  Sigmoid out = {KILN_SELECT(eq, q, negative), KILN_SELECT(q, eq, negative)};
  return out;
}

#define GELU_K0 1.59576912160573071f     /* 2 sqrt(2/pi) */
#define GELU_K1 0.0713548162726008f      /* 2 sqrt(2/pi) * 0.044715 */

KILN_INLINE v128_t gelu_z(v128_t x, v128_t x2) {
  return wasm_f32x4_mul(x, KILN_MADD(wasm_f32x4_splat(GELU_K0), x2, wasm_f32x4_splat(GELU_K1)));
}

KILN_INLINE v128_t gelu_fwd4(v128_t x) {
  return wasm_f32x4_mul(x, sigmoid(gelu_z(x, wasm_f32x4_mul(x, x))).s);
}

/*
 * gelu'(x), and through *s_out sigmoid(z(x)) (gelu(x) = x s). Past |x| = 1e4 the second
 * term is exactly 0 (s or 1 - s underflows) and s is exactly 0 or 1; clamping keeps x^2
 * finite there.
 */
KILN_INLINE v128_t gelu_grad_s(v128_t x_in, v128_t* s_out) {
  const v128_t x = wasm_f32x4_pmin(wasm_f32x4_pmax(x_in, wasm_f32x4_splat(-1e4f)), wasm_f32x4_splat(1e4f));
  const v128_t x2 = wasm_f32x4_mul(x, x);
  const Sigmoid sg = sigmoid(gelu_z(x, x2));
  const v128_t dz = KILN_MADD(wasm_f32x4_splat(GELU_K0), x2, wasm_f32x4_splat(3.0f * GELU_K1));
  *s_out = sg.s;
  return KILN_MADD(sg.s, wasm_f32x4_mul(x, sg.s), wasm_f32x4_mul(sg.s1, dz));
}

KILN_INLINE v128_t gelu_grad4(v128_t x) {
  v128_t s;
  return gelu_grad_s(x, &s);
}

KILN_INLINE v128_t silu_fwd4(v128_t x) { return wasm_f32x4_mul(x, sigmoid(x).s); }

/* silu'(x) = s + x s (1 - s) */
KILN_INLINE v128_t silu_grad_from(v128_t x, Sigmoid sg) { return KILN_MADD(sg.s, wasm_f32x4_mul(x, sg.s), sg.s1); }

enum { OP_GELU_FWD, OP_GELU_BWD, OP_SILU_FWD, OP_SILU_BWD, OP_SWIGLU_FWD, OP_SWIGLU_BWD, OP_GEGLU_FWD, OP_GEGLU_BWD };

/* Outputs of operation op for four lanes of its inputs (in1, in2 unused by some ops). */
KILN_INLINE void apply(const int op, v128_t x, v128_t in1, v128_t in2, v128_t* out0, v128_t* out1) {
  switch (op) {
    case OP_GELU_FWD:
      *out0 = gelu_fwd4(x);
      break;
    case OP_GELU_BWD:
      *out0 = wasm_f32x4_mul(gelu_grad4(x), in1);
      break;
    case OP_SILU_FWD:
      *out0 = silu_fwd4(x);
      break;
    case OP_SILU_BWD:
      *out0 = wasm_f32x4_mul(silu_grad_from(x, sigmoid(x)), in1);
      break;
    case OP_SWIGLU_FWD:
      *out0 = wasm_f32x4_mul(silu_fwd4(x), in1);
      break;
    case OP_SWIGLU_BWD: {
      const Sigmoid sg = sigmoid(x);
      *out0 = wasm_f32x4_mul(wasm_f32x4_mul(in2, in1), silu_grad_from(x, sg));
      *out1 = wasm_f32x4_mul(in2, wasm_f32x4_mul(x, sg.s));
      break;
    }
    case OP_GEGLU_FWD:
      *out0 = wasm_f32x4_mul(gelu_fwd4(x), in1);
      break;
    case OP_GEGLU_BWD: {
      v128_t s;
      const v128_t grad = gelu_grad_s(x, &s);
      *out0 = wasm_f32x4_mul(wasm_f32x4_mul(in2, in1), grad);
      *out1 = wasm_f32x4_mul(in2, wasm_f32x4_mul(x, s));
      break;
    }
  }
}

KILN_INLINE int reads_in1(const int op) { return op != OP_GELU_FWD && op != OP_SILU_FWD; }
KILN_INLINE int reads_in2(const int op) { return op == OP_SWIGLU_BWD || op == OP_GEGLU_BWD; }
KILN_INLINE int writes_out1(const int op) { return op == OP_SWIGLU_BWD || op == OP_GEGLU_BWD; }

/*
 * Elements [lo, hi): eight at a time (one 16-byte load or store per operand for the
 * 16-bit dtypes), then four, then a tail of up to three.
 */
KILN_INLINE void run_range(const ActivationArgs* a, size_t lo, size_t hi, const int op, const int dt) {
  const v128_t zero = wasm_f32x4_splat(0.0f);
  v128_t x0, x1, b0 = zero, b1 = zero, c0 = zero, c1 = zero, o0, o1, p0 = zero, p1 = zero;
  size_t i = lo;
  for (; i + 8 <= hi; i += 8) {
    kiln_load8(a->in0, i, dt, &x0, &x1);
    if (reads_in1(op)) kiln_load8(a->in1, i, dt, &b0, &b1);
    if (reads_in2(op)) kiln_load8(a->in2, i, dt, &c0, &c1);
    apply(op, x0, b0, c0, &o0, &p0);
    apply(op, x1, b1, c1, &o1, &p1);
    kiln_store8(a->out0, i, o0, o1, dt);
    if (writes_out1(op)) kiln_store8(a->out1, i, p0, p1, dt);
  }
  for (; i < hi; i += 4) {
    const size_t n = hi - i < 4 ? hi - i : 4;
#define LOAD(p) (n == 4 ? kiln_load4((p), i, dt) : kiln_load_partial((p), i, n, dt, 0.0f))
#define STORE(p, v) (n == 4 ? kiln_store4((p), i, (v), dt) : kiln_store_partial((p), i, (v), n, dt))
    x0 = LOAD(a->in0);
    if (reads_in1(op)) b0 = LOAD(a->in1);
    if (reads_in2(op)) c0 = LOAD(a->in2);
    apply(op, x0, b0, c0, &o0, &p0);
    STORE(a->out0, o0);
    if (writes_out1(op)) STORE(a->out1, p0);
#undef LOAD
#undef STORE
  }
}

/* dst[0, n) = src[b0, b0+n) widened to f32. */
KILN_INLINE void convert_block(float* dst, const void* src, size_t b0, size_t n, const int dt) {
  size_t k = 0;
  for (; k + 8 <= n; k += 8) {
    v128_t lo, hi;
    kiln_load8(src, b0 + k, dt, &lo, &hi);
    wasm_v128_store(dst + k, lo);
    wasm_v128_store(dst + k + 4, hi);
  }
  for (; k < n; k++) dst[k] = kiln_load1(src, b0 + k, dt);
}

/* dst[b0, b0+n) = src[0, n) narrowed to dt. */
KILN_INLINE void store_block(void* dst, size_t b0, const float* src, size_t n, const int dt) {
  size_t k = 0;
  for (; k + 8 <= n; k += 8) kiln_store8(dst, b0 + k, wasm_v128_load(src + k), wasm_v128_load(src + k + 4), dt);
  for (; k < n; k++) kiln_store1(dst, b0 + k, src[k], dt);
}

/* Elements per block of the 16-bit dtypes, converted to f32 on the stack around the f32 loop. */
#define HALF_BLOCK 512

/*
 * 16-bit dtypes: each block of inputs is widened to f32 on the stack, run through the
 * f32 loop, and its outputs narrowed back. Conversion and math in one loop keep too
 * many values live for V8's 16 vector registers; apart, each loop stays in registers.
 */
KILN_INLINE void run_range_half(const ActivationArgs* a, size_t lo, size_t hi, const int op, const int dt) {
  float in0[HALF_BLOCK] __attribute__((aligned(16)));
  float in1[HALF_BLOCK] __attribute__((aligned(16)));
  float in2[HALF_BLOCK] __attribute__((aligned(16)));
  float out0[HALF_BLOCK] __attribute__((aligned(16)));
  float out1[HALF_BLOCK] __attribute__((aligned(16)));
  const ActivationArgs block = {HALF_BLOCK, KILN_DT_F32, in0, in1, in2, out0, out1};
  for (size_t b0 = lo; b0 < hi; b0 += HALF_BLOCK) {
    const size_t n = hi - b0 < HALF_BLOCK ? hi - b0 : HALF_BLOCK;
    convert_block(in0, a->in0, b0, n, dt);
    if (reads_in1(op)) convert_block(in1, a->in1, b0, n, dt);
    if (reads_in2(op)) convert_block(in2, a->in2, b0, n, dt);
    run_range(&block, 0, n, op, KILN_DT_F32);
    store_block(a->out0, b0, out0, n, dt);
    if (writes_out1(op)) store_block(a->out1, b0, out1, n, dt);
  }
}

KILN_INLINE void run_op(const ActivationArgs* a, int thread, int nthreads, const int op) {
  size_t lo, hi;
  kiln_split((size_t)a->n, 16, thread, nthreads, &lo, &hi);
  switch (a->dtype) {
    case KILN_DT_F32: run_range(a, lo, hi, op, KILN_DT_F32); break;
    case KILN_DT_BF16: run_range_half(a, lo, hi, op, KILN_DT_BF16); break;
    case KILN_DT_F16: run_range_half(a, lo, hi, op, KILN_DT_F16); break;
  }
}

KILN_EXPORT(kiln_gelu_forward)
void kiln_gelu_forward(const ActivationArgs* a, int thread, int nthreads) { run_op(a, thread, nthreads, OP_GELU_FWD); }

KILN_EXPORT(kiln_gelu_backward)
void kiln_gelu_backward(const ActivationArgs* a, int thread, int nthreads) { run_op(a, thread, nthreads, OP_GELU_BWD); }

KILN_EXPORT(kiln_silu_forward)
void kiln_silu_forward(const ActivationArgs* a, int thread, int nthreads) { run_op(a, thread, nthreads, OP_SILU_FWD); }

KILN_EXPORT(kiln_silu_backward)
void kiln_silu_backward(const ActivationArgs* a, int thread, int nthreads) { run_op(a, thread, nthreads, OP_SILU_BWD); }

KILN_EXPORT(kiln_swiglu_forward)
void kiln_swiglu_forward(const ActivationArgs* a, int thread, int nthreads) { run_op(a, thread, nthreads, OP_SWIGLU_FWD); }

KILN_EXPORT(kiln_swiglu_backward)
void kiln_swiglu_backward(const ActivationArgs* a, int thread, int nthreads) { run_op(a, thread, nthreads, OP_SWIGLU_BWD); }

KILN_EXPORT(kiln_geglu_forward)
void kiln_geglu_forward(const ActivationArgs* a, int thread, int nthreads) { run_op(a, thread, nthreads, OP_GEGLU_FWD); }

KILN_EXPORT(kiln_geglu_backward)
void kiln_geglu_backward(const ActivationArgs* a, int thread, int nthreads) { run_op(a, thread, nthreads, OP_GEGLU_BWD); }
