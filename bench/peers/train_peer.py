#!/usr/bin/python3
"""PyTorch eager training peer of `attnres`: the same model file, one training step, timed.

The model is the one attnres_peer.py runs (docs/math.md: a Llama-style model -- RMSNorm, RoPE
with rotate_half, grouped-query causal attention, SwiGLU, untied LM head -- with the standard
residual, Full AttnRes or Block AttnRes of block size S), here with trainable parameters, a
batch axis and autograd. It reuses attnres_peer.py's file reading (config.json, a plain-Python
safetensors reader), token formula and BLAS helpers; the layers are written again because the
forward peer's in-place tricks (a preallocated depth buffer written slot by slot, in-place
norms) are not autograd-safe.

Training step (what attnres's trainer does, docs/training.md):
  loss  = mean next-token cross-entropy over positions 0 .. T-2 of every sequence of the batch
          (position p predicts token p+1, natural log)
  loss.backward()                                   (autograd, no custom functions)
  torch.nn.utils.clip_grad_norm_(params, 1.0)       (global norm)
  torch.optim.AdamW(betas=(0.9, 0.95), eps=1e-8), weight decay 0.1 on the 2-D tensors only
          (0 on RMSNorm gains, pseudo-queries *.query and key-norm gains *.key_norm.weight),
          learning rate fixed (--lr).

How it is written (a careful PyTorch 1.13 user's eager form): F.linear projections on (B, T, d)
activations (one sgemm each); attention as one batched matmul per (sequence, kv head): the query
heads that share a kv head are stacked, baddbmm (additive causal mask + scaled Q K^T), softmax,
bmm; a depth read stacks its sources (torch.stack, as the paper's pseudo-code does; next to the
channel axis, so the weighted sum is a batched matmul) and is vectorised over the source axis;
RMS norms go through torch.linalg.vector_norm; the key norm is applied through
  w . KeyNorm_g(v) = ((w * g) . v) / sqrt(mean(v^2) + eps)
(no (n, B, T, d) key tensor). A file without AttnRes tensors gets zero pseudo-queries and unit
key-norm gains, as attnres does; they are parameters too (unused, so gradient-free, in standard
mode).

Timing: a fixed random batch (--batch B sequences of --seq T tokens, torch.Generator seeded with
--seed, ids in [0, vocab)); --warmup W untimed steps, then --steps N timed steps;
seconds_per_step is the median, tokens_per_second = B * T / seconds_per_step.

Precision: --precision f32 (default) trains in f32; --precision bf16 is PyTorch's CPU mixed
precision: the forward pass and the loss run inside torch.autocast("cpu", dtype=torch.bfloat16),
loss.backward() outside it (as PyTorch recommends: the backward ops run in the dtypes autocast
chose for their forward ops), with f32 parameters (master weights), f32 gradients, and the clip
and AdamW in f32 -- what a PyTorch user who turns autocast on gets (no GradScaler: bf16 has f32's
exponent range). --precision f64 is for gradient checks (f64 parameters). --op-dtypes runs one
step under a dispatch-level logger and prints each ATen op of the forward, backward and
optimizer phases with its dtypes, calls and time.

  /usr/bin/python3 bench/peers/train_peer.py --model DIR --mode block --block-size 4 \
      --batch 8 --seq 256 --threads 1 --steps 5 --format json
  /usr/bin/python3 bench/peers/train_peer.py --model DIR --tokens "1,2,3,4" --grad-dump g.npz \
      [--precision f64]   # loss + every parameter's .grad (safetensors names), no optimizer step
  /usr/bin/python3 bench/peers/train_peer.py --model DIR --precision bf16 --seq 64 --batch 2 --op-dtypes
  /usr/bin/python3 bench/peers/train_peer.py --gemm-probe --threads 1

--grad-dump takes one sequence (--tokens) or a batch file (--batch FILE: one sequence a line,
ids separated by commas or spaces; sequences may differ in length). The .npz holds `loss`
(shape [1]) and one array per parameter, named as in model.safetensors.
"""

import argparse
import contextlib
import json
import math
import os
import re
import resource
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attnres_peer  # noqa: E402  (file reading, tokens, BLAS helpers)

ENGINE = "pytorch-eager-train"
ADAM_BETAS = (0.9, 0.95)
ADAM_EPS = 1e-8
WEIGHT_DECAY = 0.1
CLIP_NORM = 1.0


# ----------------------------------------------------------------------------- model

def read_names(layers):
    """Depth reads r = 0 .. L in order: attn_res / mlp_res of each layer, then the final read."""
    names = []
    for i in range(layers):
        names += [f"model.layers.{i}.attn_res", f"model.layers.{i}.mlp_res"]
    names.append("model.final_res")
    return names


class TrainModel:
    """Trainable model: `params` maps every tensor name (the safetensors names) to a leaf
    tensor with requires_grad; forward(tokens (B, T)) -> logits (B, T, vocab)."""

    def __init__(self, directory, dtype=None, mode=None, block_size=0, precision=None):
        """dtype: the parameters' dtype (f32; f64 for checks). precision "bf16" runs forward and
        loss under CPU autocast to bfloat16 (the parameters stay `dtype`, i.e. f32)."""
        import torch

        self.dtype = dtype = dtype or torch.float32
        self.precision = precision or ("f64" if dtype == torch.float64 else "f32")
        if self.precision == "bf16" and dtype != torch.float32:
            raise ValueError("bf16 (autocast) needs f32 parameters")
        self.config = c = attnres_peer.read_config(directory)
        self.mode = mode or c["mode"]
        self.block_size = block_size or c["block_size"]
        if self.mode not in ("standard", "full", "block"):
            raise ValueError(f"unknown mode '{self.mode}' (expected standard, full or block)")
        L = 2 * c["layers"]
        if self.mode == "block" and not 1 <= self.block_size <= L:
            raise ValueError(f"block size S must be between 1 and L = {L}, got {self.block_size}")
        if c["d"] % c["heads"] or c["heads"] % c["kv_heads"]:
            raise ValueError("d must divide into heads, and heads into kv heads")
        weights = attnres_peer.read_safetensors(os.path.join(directory, "model.safetensors"), dtype)
        self.head_dim = c["d"] // c["heads"]
        self.sublayers = L
        d = c["d"]
        self.file_names = set(weights)
        self.has_attn_res = all(n + ".query" in weights for n in read_names(c["layers"]))
        if not self.has_attn_res:  # a standard file: zero queries, unit gains (mean reads)
            for n in read_names(c["layers"]):
                weights[n + ".query"] = torch.zeros(d, dtype=dtype)
                weights[n + ".key_norm.weight"] = torch.ones(d, dtype=dtype)
        self.params = {name: t.contiguous().requires_grad_(True) for name, t in weights.items()}
        self._tables = {}

    def parameter_groups(self, weight_decay=WEIGHT_DECAY):
        """AdamW groups: decay on matrices (2-D), none on vectors (gains, pseudo-queries)."""
        matrices = [p for p in self.params.values() if p.dim() == 2]
        vectors = [p for p in self.params.values() if p.dim() != 2]
        return [{"params": matrices, "weight_decay": weight_decay},
                {"params": vectors, "weight_decay": 0.0}]

    # -- building blocks

    @staticmethod
    def inverse_rms(x, eps):
        """1 / sqrt(mean(x^2) + eps) over the last axis. Through vector_norm: one reduction
        forward and one fused kernel backward (x.pow(2).mean() costs ~3x more under autograd)."""
        import torch

        return torch.rsqrt(torch.linalg.vector_norm(x, dim=-1).square() / x.shape[-1] + eps)

    def rms_norm(self, x, gain, eps):
        return x * self.inverse_rms(x, eps).unsqueeze(-1) * gain

    def tables(self, T):
        """RoPE cos / sin (T, 1, hd) and the additive causal mask (group*T, T), cached per T."""
        import torch

        if T not in self._tables:
            hd, half = self.head_dim, self.head_dim // 2
            inv_freq = self.config["rope_theta"] ** (-2.0 * torch.arange(half, dtype=torch.float64) / hd)
            angles = torch.arange(T, dtype=torch.float64).unsqueeze(1) * inv_freq  # (T, hd/2)
            cos = torch.cat([angles.cos(), angles.cos()], dim=-1).to(self.dtype).unsqueeze(1)
            sin = torch.cat([angles.sin(), angles.sin()], dim=-1).to(self.dtype).unsqueeze(1)
            group = self.config["heads"] // self.config["kv_heads"]
            mask = torch.full((T, T), float("-inf"), dtype=self.dtype).triu_(1).repeat(group, 1)
            self._tables[T] = (cos, sin, mask)
        return self._tables[T]

    @staticmethod
    def apply_rope(x, cos, sin):  # x: (B, T, heads, hd); cos, sin: (T, 1, hd)
        import torch

        half = x.shape[-1] // 2
        return x * cos + torch.cat([-x[..., half:], x[..., :half]], dim=-1) * sin

    def attention(self, i, x, cos, sin, mask):
        import torch
        import torch.nn.functional as F

        p, c = self.params, self.config
        pre = f"model.layers.{i}.self_attn."
        B, T, _ = x.shape
        H, Hkv, hd = c["heads"], c["kv_heads"], self.head_dim
        group = H // Hkv
        q = self.apply_rope(F.linear(x, p[pre + "q_proj.weight"]).view(B, T, H, hd), cos, sin)
        k = self.apply_rope(F.linear(x, p[pre + "k_proj.weight"]).view(B, T, Hkv, hd), cos, sin)
        v = F.linear(x, p[pre + "v_proj.weight"]).view(B, T, Hkv, hd)
        # Query heads h = kv * group + j share kv head kv: one (group*T, T) score block per
        # (sequence, kv head), so GQA needs no copies of K / V.
        q = q.transpose(1, 2).reshape(B * Hkv, group * T, hd)
        k = k.transpose(1, 2).reshape(B * Hkv, T, hd)
        v = v.transpose(1, 2).reshape(B * Hkv, T, hd)
        scores = torch.baddbmm(mask, q, k.transpose(1, 2), alpha=1.0 / math.sqrt(hd))
        probs = torch.softmax(scores, dim=-1)
        context = torch.bmm(probs, v)                                   # (B*Hkv, group*T, hd)
        context = context.view(B, H, T, hd).transpose(1, 2).reshape(B, T, H * hd)
        return F.linear(context, p[pre + "o_proj.weight"])

    def mlp(self, i, x):
        import torch.nn.functional as F

        p = self.params
        pre = f"model.layers.{i}.mlp."
        return F.linear(F.silu(F.linear(x, p[pre + "gate_proj.weight"])) * F.linear(x, p[pre + "up_proj.weight"]),
                        p[pre + "down_proj.weight"])

    def sublayer(self, r, h, cos, sin, mask):
        i, eps = r // 2, self.config["rms_norm_eps"]
        if r % 2 == 0:
            x = self.rms_norm(h, self.params[f"model.layers.{i}.input_layernorm.weight"], eps)
            return self.attention(i, x, cos, sin, mask)
        x = self.rms_norm(h, self.params[f"model.layers.{i}.post_attention_layernorm.weight"], eps)
        return self.mlp(i, x)

    def depth_read(self, name, sources):
        """sources: list of n tensors (B, T, d) -> (B, T, d): softmax over the source axis.
        The source axis is stacked next to the channels, (B, T, n, d), so that the weighted sum
        is one batched matmul (alpha (B, T, 1, n) @ V) forward and backward instead of an
        (n, B, T, d) product and its gradients."""
        import torch

        V = torch.stack(sources, dim=-2)                               # (B, T, n, d)
        w = self.params[name + ".query"] * self.params[name + ".key_norm.weight"]
        inv_rms = self.inverse_rms(V, self.config["key_norm_eps"])     # (B, T, n)
        alpha = torch.softmax(torch.matmul(V, w) * inv_rms, dim=-1)    # (B, T, n)
        return torch.matmul(alpha.unsqueeze(-2), V).squeeze(-2)

    # -- forward

    def forward(self, tokens, outputs=None):
        """tokens: LongTensor (B, T) -> logits (B, T, vocab). `outputs`, when a list, receives
        each sublayer's output v_1 .. v_L (for the Fig. 5c gradient RMS)."""
        import torch.nn.functional as F

        c, p = self.config, self.params
        L = self.sublayers
        cos, sin, mask = self.tables(tokens.shape[1])
        embedding = F.embedding(tokens, p["model.embed_tokens.weight"])   # (B, T, d)
        names = read_names(c["layers"])

        def run(r, h):
            v = self.sublayer(r, h, cos, sin, mask)
            if outputs is not None:
                outputs.append(v)
            return v

        if self.mode == "standard":
            h = embedding
            for r in range(L):
                h = h + run(r, h)
        elif self.mode == "full":
            history = [embedding]                                         # v_0 .. v_r
            for r in range(L):
                history.append(run(r, self.depth_read(names[r], history)))
            h = self.depth_read(names[L], history)
        else:
            S = self.block_size
            blocks, partial = [embedding], None   # completed block sums b_0 .. ; open block
            for r in range(L):
                sources = blocks if partial is None else blocks + [partial]
                v = run(r, self.depth_read(names[r], sources))
                partial = v if partial is None else partial + v
                if (r + 1) % S == 0:              # sublayer r + 1 closes its block
                    blocks.append(partial)
                    partial = None
            if partial is not None:               # an incomplete last block
                blocks.append(partial)
            h = self.depth_read(names[L], blocks)
        h = self.rms_norm(h, p["model.norm.weight"], c["rms_norm_eps"])
        return F.linear(h, p["lm_head.weight"])

    def loss(self, tokens, outputs=None):
        """Mean next-token cross-entropy (nats) over positions 0 .. T-2 of every sequence; the
        forward pass and the loss run in the model's precision (autocast for bf16: the loss is
        f32, autocast runs cross_entropy's log_softmax in f32). Call .backward() outside."""
        import torch.nn.functional as F

        with attnres_peer.precision_context(self.precision):
            logits = self.forward(tokens, outputs)
            vocab = logits.shape[-1]
            return F.cross_entropy(logits[:, :-1].reshape(-1, vocab), tokens[:, 1:].reshape(-1))

    def loss_and_gradients(self, sequences, outputs=None):
        """One forward + backward over a batch of id lists (lengths may differ: the loss is the
        mean over every predicted position). Returns the loss (float); grads land in .grad."""
        import torch
        import torch.nn.functional as F

        for t in self.params.values():
            t.grad = None
        by_length = {}
        for ids in sequences:
            if len(ids) < 2:
                raise ValueError("every sequence needs at least two tokens")
            by_length.setdefault(len(ids), []).append(ids)
        predicted = sum(len(ids) - 1 for ids in sequences)
        total = 0
        for group in by_length.values():
            tokens = torch.tensor(group, dtype=torch.long)
            with attnres_peer.precision_context(self.precision):
                logits = self.forward(tokens, outputs)
                vocab = logits.shape[-1]
                total = total + F.cross_entropy(logits[:, :-1].reshape(-1, vocab),
                                                tokens[:, 1:].reshape(-1), reduction="sum")
        loss = total / predicted
        if outputs is not None:
            for v in outputs:
                v.retain_grad()
        loss.backward()
        return float(loss)


# ----------------------------------------------------------------------------- helpers

def parse_ids(text):
    return [int(t) for t in text.replace(",", " ").split()]


def peak_resident_bytes():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB


def torch_blas_config(torch):
    """What torch.__config__.show() says about its BLAS (the build line is long: keep the keys)."""
    shown = torch.__config__.show()
    settings = dict(re.findall(r"\b(BLAS_INFO|LAPACK_INFO|USE_MKL|USE_MKLDNN|USE_OPENMP)=([^,\s]*)",
                               shown))
    lines = [line.strip(" -") for line in shown.splitlines()
             if any(key in line for key in ("LAPACK", "MKL", "OpenMP", "CPU capability"))
             and "Build settings" not in line]
    return {"torch_config": lines, "torch_build_settings": settings}


def train_benchmark(model, batch, seq, seed, lr, warmup, steps, log=None):
    """`log`: an attnres_peer.op_dtype_logger() to record every op of the steps in (by phase)."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, model.config["vocab"], (batch, seq), generator=generator)
    params = list(model.params.values())
    optimizer = torch.optim.AdamW(model.parameter_groups(), lr=lr, betas=ADAM_BETAS, eps=ADAM_EPS)
    times, losses, norms = [], [], []
    logging = log if log is not None else contextlib.nullcontext()

    def phase(name):
        if log is not None:
            log.phase = name

    for step in range(warmup + steps):
        start = time.perf_counter()
        with logging:
            phase("forward")
            optimizer.zero_grad(set_to_none=True)
            loss = model.loss(tokens)           # forward + loss, under autocast for bf16
            phase("backward")
            loss.backward()                     # outside autocast
            phase("optimizer")
            norm = torch.nn.utils.clip_grad_norm_(params, CLIP_NORM)
            optimizer.step()
        elapsed = time.perf_counter() - start
        losses.append(float(loss))
        norms.append(float(norm))
        if step >= warmup:
            times.append(elapsed)
    return times, losses, norms


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", help="model directory (config.json + model.safetensors)")
    parser.add_argument("--mode", choices=["standard", "full", "block"],
                        help="residual scheme (default: the model's attn_res.mode)")
    parser.add_argument("--block-size", type=int, default=0,
                        help="Block AttnRes block size S (default: the model's)")
    parser.add_argument("--batch", default="8",
                        help="sequences per step (an integer), or with --grad-dump a batch file")
    parser.add_argument("--seq", type=int, default=256, help="tokens T per sequence")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random batch")
    parser.add_argument("--steps", type=int, default=5, help="timed training steps")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    parser.add_argument("--lr", type=float, default=3e-4, help="fixed learning rate")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--format", choices=["json", "text"], default="text")
    parser.add_argument("--grad-dump", metavar="OUT.npz",
                        help="one forward + backward (no optimizer): write loss and every .grad")
    parser.add_argument("--tokens", help='with --grad-dump: one sequence, e.g. "1,2,3"')
    parser.add_argument("--precision", choices=["f32", "bf16", "f64"], default="f32",
                        help="f32 (default); bf16: f32 parameters, forward + loss under "
                             "torch.autocast('cpu', dtype=torch.bfloat16); f64 for gradient checks")
    parser.add_argument("--op-dtypes", action="store_true",
                        help="time one step (after --warmup) under an op logger and print every "
                             "ATen op of forward / backward / optimizer with its dtypes, then exit")
    parser.add_argument("--gemm-probe", action="store_true",
                        help="only measure the 1024^3 GEMM rates (f32 sgemm and bf16, GFLOP/s) "
                             "and the BLAS in use")
    args = parser.parse_args(argv)
    if args.threads < 1 or args.steps < 1 or args.warmup < 0 or args.seq < 2:
        parser.error("--threads and --steps must be >= 1, --warmup >= 0, --seq >= 2")

    # OpenBLAS reads its thread count when it loads, i.e. when torch is imported.
    os.environ["OPENBLAS_NUM_THREADS"] = str(args.threads)
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    import torch

    attnres_peer.set_threads(args.threads)
    attnres_peer.use_best_settings(torch)

    if args.gemm_probe:
        result = attnres_peer.gemm_probe_result(torch, args.threads)
        if args.format == "json":
            print(json.dumps(result))
        else:
            attnres_peer.print_gemm_probe(result)
        return 0

    if not args.model:
        parser.error("--model is required")
    dtype = torch.float64 if args.precision == "f64" else torch.float32
    try:
        model = TrainModel(args.model, dtype, args.mode, args.block_size, args.precision)
    except (OSError, ValueError, KeyError) as error:
        print(f"train_peer: {error}", file=sys.stderr)
        return 1
    c = model.config
    block_size = model.block_size if model.mode == "block" else None

    if args.grad_dump:
        import numpy as np

        if args.tokens is not None:
            sequences = [parse_ids(args.tokens)]
        elif not args.batch.isdigit():
            with open(args.batch) as f:
                sequences = [parse_ids(line) for line in f if line.strip()]
        else:
            parser.error("--grad-dump needs --tokens IDS or --batch FILE")
        if not sequences or any(min(s) < 0 or max(s) >= c["vocab"] for s in sequences if s):
            parser.error(f"token ids must be in [0, {c['vocab']})")
        try:
            loss = model.loss_and_gradients(sequences)
        except ValueError as error:
            parser.error(str(error))
        arrays = {"loss": np.array([loss])}
        for name, t in model.params.items():
            grad = t.grad if t.grad is not None else torch.zeros_like(t)
            arrays[name] = grad.detach().numpy()
        np.savez(args.grad_dump, **arrays)
        print(f"loss {loss:.12g} over {sum(len(s) - 1 for s in sequences)} predicted positions; "
              f"{len(model.params)} gradients -> {args.grad_dump}")
        return 0

    if not args.batch.isdigit() or int(args.batch) < 1:
        parser.error("--batch must be a positive integer when timing")
    batch = int(args.batch)
    if args.op_dtypes:
        # The loss of the fresh model (no step yet) against the f32 model's on the same batch;
        # then --warmup untimed steps (so that the logged times are not first-call times) and
        # one logged step.
        generator = torch.Generator().manual_seed(args.seed)
        tokens = torch.randint(0, c["vocab"], (batch, args.seq), generator=generator)
        with torch.no_grad():
            losses = [float(model.loss(tokens))]
            reference = TrainModel(args.model, dtype, args.mode, args.block_size, "f32")
            reference_losses = [float(reference.loss(tokens))]
        train_benchmark(model, batch, args.seq, args.seed, args.lr, 0, args.warmup)
        log = attnres_peer.op_dtype_logger()
        train_benchmark(model, batch, args.seq, args.seed, args.lr, 0, 1, log)
        dtypes = {name: str(t.dtype).replace("torch.", "") for name, t in model.params.items()}
        grad_dtypes = sorted({str(t.grad.dtype).replace("torch.", "")
                              for t in model.params.values() if t.grad is not None})
        if args.format == "json":
            print(json.dumps({"precision": args.precision, "mode": model.mode, "batch": batch,
                              "tokens": args.seq, "ops": log.rows(), "summary": log.summary(),
                              "loss": losses[0], "loss_f32": reference_losses[0],
                              "parameter_dtypes": sorted(set(dtypes.values())),
                              "gradient_dtypes": grad_dtypes,
                              "torch_version": torch.__version__,
                              "torch_settings": attnres_peer.torch_settings(torch)}))
        else:
            attnres_peer.print_op_dtypes(
                log, f"{ENGINE} {model.mode}{' S=%d' % block_size if block_size else ''} "
                     f"B={batch} T={args.seq} precision {args.precision}: ATen ops of one training step")
            print(f"  initial loss {losses[0]:.6f} (f32: {reference_losses[0]:.6f}); parameters "
                  f"{', '.join(sorted(set(dtypes.values())))}, gradients {', '.join(grad_dtypes)}")
        return 0
    times, losses, norms = train_benchmark(model, batch, args.seq, args.seed, args.lr,
                                           args.warmup, args.steps)
    seconds = statistics.median(times)
    result = {
        "tokens_per_second": batch * args.seq / seconds,
        "seconds_per_step": seconds,
        "seconds_min": min(times),
        "threads": args.threads,
        "precision": args.precision,
        "autocast": "cpu bfloat16" if args.precision == "bf16" else None,
        "steps": args.steps,
        "warmup": args.warmup,
        "batch": batch,
        "tokens": args.seq,
        "mode": model.mode,
        "block_size": block_size,
        "lr": args.lr,
        "loss_first": losses[0],
        "loss_last": losses[-1],
        "grad_norm_last": norms[-1],
        "engine": ENGINE,
        "device": "cpu",
        "torch_version": torch.__version__,
        "torch_num_threads": torch.get_num_threads(),
        "torch_settings": attnres_peer.torch_settings(torch),
        "blas": {**torch_blas_config(torch), **attnres_peer.blas_info()},
        "peak_resident_bytes": peak_resident_bytes(),
    }
    if args.format == "json":
        print(json.dumps(result))
    else:
        print(f"{ENGINE} {model.mode}{' S=%d' % block_size if block_size else ''} "
              f"B={batch} T={args.seq} threads={args.threads} {args.precision}: "
              f"{result['tokens_per_second']:.0f} tokens/s "
              f"({seconds * 1e3:.0f} ms per step, median of {args.steps}; loss "
              f"{losses[0]:.4f} -> {losses[-1]:.4f}; peak RSS {result['peak_resident_bytes'] / 2**20:.0f} MiB; "
              f"BLAS core {result['blas'].get('openblas_corename')})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
