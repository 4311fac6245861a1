#!/usr/bin/python3
"""PyTorch reference of depthgrad's MicroLM for `depthgrad bench --compare-torch`.

The model is written from the math in the reference experiment's protocol (tools/attnres/PROTOCOL.md
§2) and nn/lm/micro_lm.cpp: RMSNorm (eps inside the root), RoPE rotate-half, causal attention by the
math formula (torch 1.13 has no scaled_dot_product_attention), SwiGLU, per-token depth routes
(block_attnres: one route for Q, K and V; rd_attnres: a second route for V), head tied to the
embedding. Parameter names are depthgrad's, so depthgrad's safetensors weights load as a state dict.

Modes:
  --config NAME --threads N [--precision float32|bf16] [--warmup W --steps S] [--json]
      time full training steps (sample the batch, zero grad, forward, loss, backward, clip 1.0,
      AdamW lr 6e-4 wd 0.01) on random tokens (numpy default_rng(0), the tokens and windows
      depthgrad draws); report the median of the timed steps and peak RSS (VmHWM). One
      process per measurement: the peak is a process-lifetime figure. --precision bf16 runs the
      forward and the loss under torch.autocast("cpu", dtype=torch.bfloat16) (matmuls in bf16
      through oneDNN; the weights, their gradients and AdamW stay float32), torch's counterpart
      of depthgrad's bf16 matmul precision. The OpenBLAS core the process runs (its float32
      matmuls go to the system OpenBLAS through libblas.so.3) is reported as blas_core; `depthgrad
      bench` sets OPENBLAS_CORETYPE to give it depthgrad's.
  --check WEIGHTS.safetensors --tokens FILE.json [--json]
      load depthgrad's weights and token batch (written by `depthgrad bench --write-check DIR`),
      print the parameter count, the loss, and the losses after each of the same AdamW steps.

It needs only Debian's python3-torch and numpy (the safetensors file is parsed with struct/json).
It is not part of the build or the tests.
"""
import argparse
import json
import math
import os
import resource
import struct
import sys
import time

CONFIGS = {  # the preset table, run_presets() in train/lm/run_config.cpp (sizes, bench warm-up and timed steps)
    "micro": dict(vocab=512, dim=64, layers=2, heads=4, seq_len=64, batch=4, expansion=3, warmup=3, timed=50),
    "mini": dict(vocab=512, dim=128, layers=4, heads=4, seq_len=128, batch=8, expansion=3, warmup=3, timed=20),
    "small": dict(vocab=512, dim=256, layers=8, heads=8, seq_len=256, batch=8, expansion=3, warmup=3, timed=5),
    "base": dict(vocab=50304, dim=768, layers=12, heads=12, seq_len=256, batch=4, expansion=4, warmup=2, timed=3),
}
MODES = ("standard", "block_attnres", "rd_attnres")
BENCH_TOKENS = 100000  # tools/attnres/bench.cpp kBenchTokens


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", choices=sorted(CONFIGS))
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--mode", default="rd_attnres", choices=MODES)
    p.add_argument("--precision", default="float32", choices=("float32", "bf16"),
                   help="bf16: forward and loss under CPU autocast to bfloat16")
    p.add_argument("--warmup", type=int, default=None)
    p.add_argument("--steps", type=int, default=None, help="timed steps")
    p.add_argument("--check", metavar="WEIGHTS", help="depthgrad safetensors weights")
    p.add_argument("--tokens", metavar="FILE", help="token batch JSON written with the weights")
    p.add_argument("--json", action="store_true", help="print one JSON line")
    p.add_argument("--verbose", action="store_true", help="every step on stderr")
    a = p.parse_args()
    if a.check is None and a.config is None:
        p.error("give --config NAME (timing) or --check WEIGHTS --tokens FILE")
    if a.check is not None and a.tokens is None:
        p.error("--check needs --tokens FILE")
    if a.threads < 1:
        p.error("--threads must be >= 1")
    return a


ARGS = parse_args()
# Thread counts must be fixed before torch (and its OpenMP OpenBLAS) start their pools.
os.environ["OMP_NUM_THREADS"] = str(ARGS.threads)
os.environ["OPENBLAS_NUM_THREADS"] = str(ARGS.threads)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def rss_kib(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


# ---- the model -------------------------------------------------------------------------------------


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):  # x [.., D]
        return x * (1.0 / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)) * self.weight


def rope_tables(T, hd, base=10000.0):
    # float32 throughout, as depthgrad's rope_tables: inv_freq_i = 1 / base^(2i/hd), angle = p·inv_freq_i
    i = torch.arange(hd // 2, dtype=torch.float32)
    inv_freq = 1.0 / torch.pow(torch.tensor(base, dtype=torch.float32), 2 * i / hd)
    angle = torch.arange(T, dtype=torch.float32)[:, None] * inv_freq[None, :]
    return torch.cos(angle), torch.sin(angle)  # [T, hd/2]


def rope(x, cos, sin):  # x [B, H, T, hd]: pairs (i, i + hd/2)
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h], x[..., h:]
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)


class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.q = nn.Linear(dim, dim, bias=False)
        self.k = nn.Linear(dim, dim, bias=False)
        self.v = nn.Linear(dim, dim, bias=False)
        self.output = nn.Linear(dim, dim, bias=False)

    def forward(self, u_qk, u_v, cos, sin, mask):  # [B, T, D] -> [B, T, D]
        B, T, D = u_qk.shape
        H, hd = self.heads, self.head_dim
        q = rope(self.q(u_qk).view(B, T, H, hd).transpose(1, 2), cos, sin)
        k = rope(self.k(u_qk).view(B, T, H, hd).transpose(1, 2), cos, sin)
        v = self.v(u_v).view(B, T, H, hd).transpose(1, 2)
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))  # [B, H, T, T]
        p = scores.masked_fill(mask, float("-inf")).softmax(-1)
        return self.output((p @ v).transpose(1, 2).reshape(B, T, D))


class FeedForward(nn.Module):  # SwiGLU
    def __init__(self, dim, hidden):
        super().__init__()
        self.up = nn.Linear(dim, hidden, bias=False)
        self.gate = nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class Block(nn.Module):
    def __init__(self, c, index):
        super().__init__()
        self.mode = c["mode"]
        eps = c.get("norm_eps", 1e-6)
        if self.mode != "standard":  # block l routes over S_0..S_l
            self.route_norm = RMSNorm(c["dim"], eps)
            self.qk_route = nn.Linear(c["dim"], index + 1, bias=False)
            if self.mode == "rd_attnres":
                self.v_route = nn.Linear(c["dim"], index + 1, bias=False)
        self.attention_norm = RMSNorm(c["dim"], eps)
        self.attention = Attention(c["dim"], c["heads"])
        self.ffn_norm = RMSNorm(c["dim"], eps)
        self.ffn = FeedForward(c["dim"], c["expansion"] * c["dim"])

    def forward(self, sources, cos, sin, mask):  # sources S_0..S_l [B, T, D] -> S_{l+1}
        c = sources[-1]
        if self.mode == "standard":
            u_qk = u_v = self.attention_norm(c)
        else:
            z = self.route_norm(c)
            stacked = torch.stack(sources, dim=-2)  # [B, T, k, D]
            alpha_qk = self.qk_route(z).softmax(-1)  # [B, T, k]
            u_qk = self.attention_norm((alpha_qk.unsqueeze(-1) * stacked).sum(-2))
            if self.mode == "rd_attnres":
                alpha_v = self.v_route(z).softmax(-1)
                u_v = self.attention_norm((alpha_v.unsqueeze(-1) * stacked).sum(-2))
            else:
                u_v = u_qk
        x = c + self.attention(u_qk, u_v, cos, sin, mask)
        return x + self.ffn(self.ffn_norm(x))


class MicroLM(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.token = nn.Embedding(c["vocab"], c["dim"])
        self.blocks = nn.ModuleList(Block(c, i) for i in range(c["layers"]))
        self.final_norm = RMSNorm(c["dim"], c.get("norm_eps", 1e-6))
        cos, sin = rope_tables(c["seq_len"], c["dim"] // c["heads"])
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        mask = torch.ones(c["seq_len"], c["seq_len"], dtype=torch.bool).triu(1)
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, ids):  # ids [B, T] -> logits [B, T, V]
        T = ids.shape[1]
        cos, sin, mask = self.cos[:T], self.sin[:T], self.mask[:T, :T]
        sources = [self.token(ids)]
        for block in self.blocks:
            out = block(sources, cos, sin, mask)
            if self.c["mode"] == "standard":
                sources = [out]
            else:
                sources.append(out)
        return F.linear(self.final_norm(sources[-1]), self.token.weight)  # tied head

    def loss(self, ids, targets):
        logits = self.forward(ids)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def parameter_count(model):
    return sum(p.numel() for p in model.parameters())  # shared tensors once, as depthgrad


def matmul_params(model):  # tools/attnres/bench.cpp matmul_parameters: 2-D weights; the tied head is token.weight
    return sum(p.numel() for p in model.parameters() if p.dim() == 2)


def step_flops(c, batch, n_matmul):  # tools/attnres/bench.cpp training_step_flops
    tokens = batch * c["seq_len"]
    return 6.0 * n_matmul * tokens + 12.0 * c["layers"] * batch * c["seq_len"] ** 2 * c["dim"]


def train_step(model, opt, ids, targets, bf16=False):
    opt.zero_grad(set_to_none=True)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        loss = model.loss(ids, targets)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return loss.item()


def make_optimizer(model, lr=6e-4, weight_decay=0.01):
    return torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=weight_decay)


# ---- safetensors (reader only) -----------------------------------------------------------------------


def load_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        sys.exit(f"{path}: too short for a safetensors file")
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        if e["dtype"] not in ("F32", "F64"):
            sys.exit(f"{path}: tensor {name} has dtype {e['dtype']}, expected F32 or F64")
        begin, end = e["data_offsets"]
        arr = np.frombuffer(body[begin:end], dtype="<f4" if e["dtype"] == "F32" else "<f8")
        out[name] = torch.from_numpy(arr.astype(np.float32).reshape(e["shape"]))
    return out


def run_check(args):
    with open(args.tokens) as f:
        spec = json.load(f)
    c = dict(spec["model"])
    model = MicroLM(c)
    weights = load_safetensors(args.check)
    differ = set(model.state_dict()) ^ set(weights)
    if differ:
        sys.exit(f"{args.check}: tensor names differ from the torch model's: {sorted(differ)}")
    model.load_state_dict(weights, strict=True)
    B, T = spec["batch"], c["seq_len"]
    ids = torch.tensor(spec["inputs"], dtype=torch.int64).view(B, T)
    targets = torch.tensor(spec["targets"], dtype=torch.int64).view(B, T)
    opt = make_optimizer(model, spec.get("lr", 6e-4), spec.get("weight_decay", 0.01))
    steps = len(spec.get("losses_after_steps", []))
    with torch.no_grad():
        loss0 = model.loss(ids, targets).item()
    after = []
    for _ in range(steps):
        train_step(model, opt, ids, targets)
        with torch.no_grad():
            after.append(model.loss(ids, targets).item())
    result = dict(config=spec.get("config", ""), parameters=parameter_count(model), loss=loss0, losses_after_steps=after,
                  depthgrad_loss=spec.get("loss"), depthgrad_parameters=spec.get("parameters"))
    if args.json:
        print(json.dumps(result))
    else:
        print(f"parameters: torch {result['parameters']}, depthgrad {result['depthgrad_parameters']}")
        print(f"loss: torch {loss0:.8f}, depthgrad {spec.get('loss'):.8f}, |diff| {abs(loss0 - spec.get('loss')):.3e}")
        for i, (a, b) in enumerate(zip(after, spec.get("losses_after_steps", []))):
            print(f"after step {i + 1}: torch {a:.8f}, depthgrad {b:.8f}, |diff| {abs(a - b):.3e}")


# ---- timing --------------------------------------------------------------------------------------------


def openblas_core():
    """The core of the OpenBLAS loaded in this process ("SkylakeX"), or "" when there is none."""
    import ctypes
    try:
        lib = ctypes.CDLL("libopenblas.so.0", mode=os.RTLD_NOLOAD | os.RTLD_GLOBAL)
    except OSError:
        return ""
    lib.openblas_get_corename.restype = ctypes.c_char_p
    return lib.openblas_get_corename().decode()



def run_timing(args):
    torch.set_num_threads(args.threads)
    c = dict(CONFIGS[args.config])
    c["mode"] = args.mode
    warmup = c["warmup"] if args.warmup is None else args.warmup
    timed = c["timed"] if args.steps is None else args.steps
    B, T, V = c["batch"], c["seq_len"], c["vocab"]
    baseline = rss_kib("VmRSS")
    n_tokens = max(BENCH_TOKENS, 4 * B * (T + 1))
    tokens = np.random.default_rng(0).integers(0, V, size=n_tokens).astype(np.int64)  # depthgrad's tokens
    batch_rng = np.random.default_rng(0)  # depthgrad's window draws
    torch.manual_seed(0)
    model = MicroLM(c)
    with torch.no_grad():  # the reference's init: N(0, 0.02) for every matrix, gains at one
        for name, p in model.named_parameters():
            if p.dim() == 2:
                p.normal_(0.0, 0.02)
    model.train()
    opt = make_optimizer(model)
    step_seconds, losses = [], []
    for s in range(warmup + timed):
        t0 = time.perf_counter()
        starts = batch_rng.integers(0, n_tokens - T - 1, size=B)
        rows = torch.from_numpy(np.stack([tokens[i:i + T + 1] for i in starts]))
        value = train_step(model, opt, rows[:, :-1], rows[:, 1:], bf16=args.precision == "bf16")
        dt = time.perf_counter() - t0
        if not math.isfinite(value):
            sys.exit(f"torch reference diverged: loss {value} at step {s}")
        losses.append(value)
        if s >= warmup:
            step_seconds.append(dt)
        if args.verbose:
            print(f"  torch {args.config} t{args.threads} step {s + 1}/{warmup + timed}: {dt * 1e3:.1f} ms, loss {value:.4f}",
                  file=sys.stderr)
    # Peak RSS of this process: VmHWM, as depthgrad reads it. getrusage's ru_maxrss is not used: Linux
    # carries the maximum over exec, so a child spawned by a large parent (posix_spawn/vfork shares the
    # parent's memory until exec) reports the parent's peak.
    peak = rss_kib("VmHWM")
    ru_maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux; for reference only
    median = float(np.median(step_seconds))
    n_matmul = matmul_params(model)
    flops = step_flops(c, B, n_matmul)
    result = dict(impl="torch", config=args.config, mode=args.mode, threads=args.threads,
                  parameters=parameter_count(model), matmul_params=n_matmul, batch=B, seq_len=T, warmup=warmup,
                  timed=timed, step_seconds=step_seconds, losses=losses, median_step_seconds=median,
                  mean_step_seconds=float(np.mean(step_seconds)), tokens_per_second=B * T / median, step_flops=flops,
                  achieved_gflops=flops / median * 1e-9, peak_rss_kib=peak, baseline_rss_kib=baseline, ru_maxrss_kib=ru_maxrss,
                  precision=args.precision, blas_core=openblas_core(), torch_version=torch.__version__)
    if args.json:
        print(json.dumps(result))
    else:
        print(f"torch {args.config} threads={args.threads} {args.precision}: {result['tokens_per_second']:.0f} tokens/s, "
              f"{median * 1e3:.2f} ms/step, {result['achieved_gflops']:.1f} GFLOP/s, peak {peak / 1024:.0f} MiB "
              f"({parameter_count(model)} parameters)")


if __name__ == "__main__":
    if ARGS.check is not None:
        run_check(ARGS)
    else:
        run_timing(ARGS)
