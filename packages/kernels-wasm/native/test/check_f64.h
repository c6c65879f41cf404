// Attention, the norms and cross-entropy of one instruction set's kernels (isa) against f64,
// for kernel_check.cc: their bits are each instruction set's own (sums across lanes), so
// their values are checked, within 1e-4 of the largest (expect_close).
#ifndef KILN_NATIVE_CHECK_F64_H
#define KILN_NATIVE_CHECK_F64_H

#include "check_support.h"

namespace kiln_native {
namespace {

void check_attention(const IsaKernels& isa, int T, int H, int KVH, int D, int DV, int W) {
  const int B = 2, group = H / KVH;
  const float scale = 1.0f / sqrtf((float)D);
  Array q(kF32, (size_t)B * T * H * D, 11), k(kF32, (size_t)B * T * KVH * D, 12), v(kF32, (size_t)B * T * KVH * DV, 13),
      dout(kF32, (size_t)B * T * H * DV, 14);
  std::vector<float> out((size_t)B * T * H * DV), lse((size_t)B * H * T), dq(q.size()), dk(k.size()), dv(v.size());
  uint32_t tickets = 0;
  AttentionCall a{B, T, H, KVH, D, DV, (int64_t)H * D, (int64_t)KVH * D, (int64_t)KVH * DV, (int64_t)H * DV, scale, W, kF32,
                  q.bytes(), k.bytes(), v.bytes(), (uint8_t*)out.data(), lse.data(), nullptr, nullptr, nullptr, nullptr, &tickets};
  isa.attention_forward(a, 0, 1);
  tickets = 0;
  a.d_out = dout.bytes(), a.d_q = (uint8_t*)dq.data(), a.d_k = (uint8_t*)dk.data(), a.d_v = (uint8_t*)dv.data();
  isa.attention_backward(a, 0, 1);

  std::vector<double> wout(out.size()), wlse(lse.size()), wdq(dq.size(), 0.0), wdk(dk.size(), 0.0), wdv(dv.size(), 0.0), p(T), dp(T);
  for (int b = 0; b < B; b++)
    for (int h = 0; h < H; h++)
      for (int t = 0; t < T; t++) {
        const int g = h / group, lo = t - W + 1 < 0 ? 0 : t - W + 1;
        auto Q = [&](int x) { return (double)q.f[((size_t)(b * T + t) * H + h) * D + x]; };
        auto K = [&](int u, int x) { return (double)k.f[((size_t)(b * T + u) * KVH + g) * D + x]; };
        auto Vv = [&](int u, int x) { return (double)v.f[((size_t)(b * T + u) * KVH + g) * DV + x]; };
        const size_t orow = ((size_t)(b * T + t) * H + h) * DV;
        double m = -INFINITY, l = 0.0;
        for (int u = lo; u <= t; u++) {
          double s = 0.0;
          for (int x = 0; x < D; x++) s += Q(x) * K(u, x);
          p[u] = s * scale;
          m = fmax(m, p[u]);
        }
        for (int u = lo; u <= t; u++) l += (p[u] = exp(p[u] - m));
        for (int u = lo; u <= t; u++) p[u] /= l;
        for (int x = 0; x < DV; x++) {
          double o = 0.0;
          for (int u = lo; u <= t; u++) o += p[u] * Vv(u, x);
          wout[orow + x] = o;
        }
        wlse[((size_t)b * H + h) * T + t] = m + log(l);
        double dd = 0.0;
        for (int x = 0; x < DV; x++) dd += (double)dout.f[orow + x] * wout[orow + x];
        for (int u = lo; u <= t; u++) {
          double s = 0.0;
          for (int x = 0; x < DV; x++) s += (double)dout.f[orow + x] * Vv(u, x);
          dp[u] = p[u] * (s - dd);  // dS
          for (int x = 0; x < DV; x++) wdv[((size_t)(b * T + u) * KVH + g) * DV + x] += p[u] * dout.f[orow + x];
          for (int x = 0; x < D; x++) {
            wdq[((size_t)(b * T + t) * H + h) * D + x] += scale * dp[u] * K(u, x);
            wdk[((size_t)(b * T + u) * KVH + g) * D + x] += scale * dp[u] * Q(x);
          }
        }
      }
  expect_close("attention", "out", out, wout);
  expect_close("attention", "lse", lse, wlse);
  expect_close("attention", "dQ", dq, wdq);
  expect_close("attention", "dK", dk, wdk);
  expect_close("attention", "dV", dv, wdv);
}

void check_norm(const IsaKernels& isa, bool layer, int rows, int dim) {
  Array x(kF32, (size_t)rows * dim, 21), w(kF32, (size_t)dim, 22), bias(kF32, (size_t)dim, 23), dout(kF32, (size_t)rows * dim, 24);
  std::vector<float> out(x.size()), mean(rows), rstd(rows), dx(x.size());
  const int dim4 = (dim + 3) / 4 * 4, partials = 3;
  std::vector<float> scratch((size_t)partials * 3 * dim4);
  uint32_t tickets = 0;
  NormCall n{};
  n.rows = rows, n.dim = dim, n.dt = kF32, n.layer = layer, n.eps = 1e-5f, n.weight_offset = layer ? 0.0f : 1.0f;
  n.x = x.bytes(), n.weight = w.bytes(), n.bias = layer ? bias.bytes() : nullptr, n.mean = layer ? mean.data() : nullptr, n.rstd = rstd.data();
  n.out = (uint8_t*)out.data();
  isa.norm_forward(n, 0, 1);
  n.d_out = dout.bytes(), n.d_x = (uint8_t*)dx.data(), n.d_bias = layer, n.scratch = scratch.data(), n.stride = 3 * dim4, n.partials = partials;
  n.tickets = &tickets;
  isa.norm_backward(n, 0, 1);

  std::vector<double> wout(out.size()), wdx(dx.size()), wdw(dim, 0.0);
  std::vector<float> dw(dim, 0.0f);
  for (int p = 0; p < partials; p++)
    for (int j = 0; j < dim; j++) dw[j] += scratch[(size_t)p * 3 * dim4 + j];
  for (int r = 0; r < rows; r++) {
    const float* xr = &x.f[(size_t)r * dim];
    double mu = 0.0, var = 0.0;
    if (layer) {
      for (int j = 0; j < dim; j++) mu += xr[j];
      mu /= dim;
    }
    for (int j = 0; j < dim; j++) var += (xr[j] - mu) * (xr[j] - mu);
    const double rs = 1.0 / sqrt(var / dim + 1e-5);
    double gm = 0.0, gxm = 0.0;
    for (int j = 0; j < dim; j++) {
      const double xhat = (xr[j] - mu) * rs, g = dout.f[(size_t)r * dim + j] * (w.f[j] + n.weight_offset);
      wout[(size_t)r * dim + j] = xhat * (w.f[j] + n.weight_offset) + (layer ? bias.f[j] : 0.0);
      gm += g / dim;
      gxm += g * xhat / dim;
      wdw[j] += dout.f[(size_t)r * dim + j] * xhat;
    }
    for (int j = 0; j < dim; j++) {
      const double xhat = (xr[j] - mu) * rs, g = dout.f[(size_t)r * dim + j] * (w.f[j] + n.weight_offset);
      wdx[(size_t)r * dim + j] = rs * (g - (layer ? gm : 0.0) - xhat * gxm);
    }
  }
  expect_close(layer ? "layerNorm" : "rmsNorm", "out", out, wout);
  expect_close(layer ? "layerNorm" : "rmsNorm", "dX", dx, wdx);
  expect_close(layer ? "layerNorm" : "rmsNorm", "dWeight", dw, wdw);
}

void check_cross_entropy(const IsaKernels& isa, int rows, int vocab) {
  Array logits(kF32, (size_t)rows * vocab, 31);
  for (float& x : logits.f) x *= 8.0f;
  std::vector<int32_t> targets(rows);
  for (int r = 0; r < rows; r++) targets[r] = r == 1 ? -1 : (r * 977) % vocab;
  std::vector<float> losses(rows), lse(rows), dlogits(logits.size());
  const float scale = 1.0f / (float)rows;
  const CrossEntropyCall call{rows, vocab, kF32, kCrossEntropyForwardBackward, logits.bytes(), targets.data(), losses.data(), lse.data(), (uint8_t*)dlogits.data(), scale};
  isa.cross_entropy(call, 0, 1);
  std::vector<double> wlosses(rows), wlse(rows), wd(dlogits.size());
  for (int r = 0; r < rows; r++) {
    const float* x = &logits.f[(size_t)r * vocab];
    double m = -INFINITY, sum = 0.0;
    for (int j = 0; j < vocab; j++) m = x[j] > m ? x[j] : m;
    for (int j = 0; j < vocab; j++) sum += exp(x[j] - m);
    wlse[r] = m + log(sum);
    wlosses[r] = targets[r] < 0 ? 0.0 : wlse[r] - x[targets[r]];
    for (int j = 0; j < vocab; j++) wd[(size_t)r * vocab + j] = targets[r] < 0 ? 0.0 : scale * (exp(x[j] - wlse[r]) - (j == targets[r]));
  }
  expect_close("crossEntropy", "losses", losses, wlosses);
  expect_close("crossEntropy", "lse", lse, wlse);
  expect_close("crossEntropy", "dLogits", dlogits, wd);
}

}  // namespace
}  // namespace kiln_native

#endif
