"""The reference side of cuda.mjs: the same GEMMs and causal attention through
PyTorch on the same GPU (cuBLAS/cuBLASLt for matmul, scaled_dot_product_attention
for attention), timed the same way: the first (cold) call, then the median and best
of --calls calls, each synchronised. TF32 is off so f32 is f32. Prints one JSON line.

Usage: python3 cuda_kernels_torch.py [--calls 20] [--size 4096]
"""
import argparse
import json
import time

import torch
import torch.nn.functional as F


def timed(fn, calls):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    cold = time.perf_counter() - t0
    each = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        each.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    pipelined = (time.perf_counter() - t0) / calls
    return cold, sorted(each)[len(each) // 2], min(each), pipelined


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--calls", type=int, default=20)
    p.add_argument("--size", type=int, default=4096)
    a = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(0)
    dtypes = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}
    n = a.size
    gemm = []
    for name, dt in dtypes.items():
        x, y = torch.randn(n, n, device="cuda", dtype=dt), torch.randn(n, n, device="cuda", dtype=dt)
        cold, med, best, pipelined = timed(lambda: torch.matmul(x, y), a.calls)
        flops = 2 * n**3
        gemm.append({"dtype": name, "size": n, "kernel": "torch.matmul", "tflops_median": flops / med / 1e12, "tflops_best": flops / best / 1e12, "tflops_pipelined": flops / pipelined / 1e12, "cold_ms": cold * 1e3})
    attention = []
    b, t, h, d = 8, 1024, 12, 64
    for name in ["bf16", "f32"]:
        dt = dtypes[name]
        q, k, v = (torch.randn(b, h, t, d, device="cuda", dtype=dt, requires_grad=True) for _ in range(3))
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        d_out = torch.randn_like(out)
        fwd = timed(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True), a.calls)
        bwd = timed(lambda: torch.autograd.grad(out, (q, k, v), d_out, retain_graph=True), a.calls)
        flops = 4 * b * h * d * (t * (t + 1) / 2)
        attention.append({"dtype": name, "batch": b, "seqLen": t, "heads": h, "headDim": d, "forward_tflops_median": flops / fwd[1] / 1e12, "backward_tflops_median": 2.5 * flops / bwd[1] / 1e12, "forward_tflops_pipelined": flops / fwd[3] / 1e12, "backward_tflops_pipelined": 2.5 * flops / bwd[3] / 1e12, "forward_cold_ms": fwd[0] * 1e3, "backward_cold_ms": bwd[0] * 1e3})
    print(json.dumps({"impl": "pytorch", "torch": torch.__version__, "device": torch.cuda.get_device_name(), "gemm": gemm, "attention": attention}))


if __name__ == "__main__":
    main()
