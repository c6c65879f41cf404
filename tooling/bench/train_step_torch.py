"""One training configuration in PyTorch, timed: the reference side of train-step.mjs.

GPT-2 architecture written as nanoGPT does (nn.Linear layers, learned positions,
tied embeddings, tanh GELU, causal attention: scaled_dot_product_attention where
the torch has it, else written out), AdamW, gradient clipping. f32, or bf16
autocast over f32 weights (--dtype bf16). On CUDA (--device cuda) every step is
synchronised and TF32 is off, so f32 is f32. Prints one JSON line: the mean step
time (ms_per_step) and the median and best of the timed steps, the first (cold)
step, and every step's time from the first on (step_ms).

Usage: /usr/bin/python3 train_step_torch.py --layers 4 --heads 4 --hidden 256 --vocab 4096 --seq 128 --batch 8 --steps 10 --threads 2
       python3 train_step_torch.py --device cuda --dtype bf16 --layers 12 --heads 12 --hidden 768 --vocab 50257 --seq 1024 --batch 8
"""
import argparse
import json
import math
import resource
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, c, h):
        super().__init__()
        self.h = h
        self.ln_1 = nn.LayerNorm(c)
        self.c_attn = nn.Linear(c, 3 * c)
        self.c_proj = nn.Linear(c, c)
        self.ln_2 = nn.LayerNorm(c)
        self.c_fc = nn.Linear(c, 4 * c)
        self.mlp_proj = nn.Linear(4 * c, c)

    def forward(self, x, mask):
        b, t, c = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(c, dim=2)
        q = q.view(b, t, self.h, c // self.h).transpose(1, 2)
        k = k.view(b, t, self.h, c // self.h).transpose(1, 2)
        v = v.view(b, t, self.h, c // self.h).transpose(1, 2)
        if hasattr(F, "scaled_dot_product_attention"):
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = F.softmax(att.masked_fill(mask[:, :, :t, :t] == 0, float("-inf")), dim=-1)
            y = att @ v
        y = y.transpose(1, 2).contiguous().view(b, t, c)
        x = x + self.c_proj(y)
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, vocab, seq, layers, heads, hidden):
        super().__init__()
        self.wte = nn.Embedding(vocab, hidden)
        self.wpe = nn.Embedding(seq, hidden)
        self.blocks = nn.ModuleList([Block(hidden, heads) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(hidden)
        self.register_buffer("mask", torch.tril(torch.ones(seq, seq)).view(1, 1, seq, seq))
        for m in self.modules():  # GPT-2 init, as nanoGPT
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, 0.0, 0.02)
            if isinstance(m, nn.Linear):
                nn.init.zeros_(m.bias)

    def forward(self, ids, targets):
        t = ids.size(1)
        x = self.wte(ids) + self.wpe(torch.arange(t, device=ids.device))
        for blk in self.blocks:
            x = blk(x, self.mask)
        logits = self.ln_f(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def main():
    p = argparse.ArgumentParser()
    for name, default in [("layers", 4), ("heads", 4), ("hidden", 256), ("vocab", 4096), ("seq", 128), ("batch", 8), ("steps", 10), ("warmup", 3), ("threads", 2)]:
        p.add_argument(f"--{name}", type=int, default=default)
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="f32", choices=["f32", "bf16"])
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    cuda = a.device.startswith("cuda")
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    model = GPT(a.vocab, a.seq, a.layers, a.heads, a.hidden).to(a.device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1)
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(0, a.vocab, (a.batch, a.seq), generator=gen).to(a.device)
    targets = torch.randint(0, a.vocab, (a.batch, a.seq), generator=gen).to(a.device)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type="cuda" if cuda else "cpu", dtype=torch.bfloat16, enabled=a.dtype == "bf16"):
            loss = model(ids, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss.item()  # waits for the device

    t0 = time.perf_counter()
    step()
    cold = time.perf_counter() - t0
    every = [cold]
    for _ in range(a.warmup - 1):
        t0 = time.perf_counter()
        step()
        every.append(time.perf_counter() - t0)
    each = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        loss = step()
        each.append(time.perf_counter() - t0)
    every += each
    seconds = sum(each) / a.steps
    print(json.dumps({
        "impl": "pytorch",
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name() if cuda else "cpu",
        "dtype": a.dtype,
        "threads": torch.get_num_threads(),
        "cold_ms": cold * 1000,
        "ms_per_step": seconds * 1000,
        "ms_per_step_median": sorted(each)[len(each) // 2] * 1000,
        "ms_per_step_best": min(each) * 1000,
        "step_ms": [x * 1000 for x in every],
        "peak_device_bytes": torch.cuda.max_memory_allocated() if cuda else None,
        "tokens_per_s": a.batch * a.seq / seconds,
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "loss": loss,
        "params": sum(x.numel() for x in model.parameters()),
    }))


if __name__ == "__main__":
    main()
