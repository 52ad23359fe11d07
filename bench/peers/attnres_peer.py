#!/usr/bin/python3
"""PyTorch eager peer of `attnres`: the same model file, the same forward pass, timed.

Our own implementation, written from the project's docs (docs/math.md) and its C++ code
(core/model/src/layers.cpp, core/model/src/forward.cpp, core/model/src/depth_layout.cpp): a Llama-style model
(RMSNorm, RoPE with rotate_half, grouped-query causal attention, SwiGLU, untied LM head) with
three residual schemes:

  standard  h_{l+1} = h_l + f_l(h_l)
  full      Full AttnRes: read r (r = 0 .. L) is a softmax over the sources v_0 .. v_r
            (v_0 = the token embedding, v_i = output of sublayer i)
  block     Block AttnRes with block size S: read r sees the completed block sums
            b_0 = v_0, b_1, .. plus the running partial sum of the current block (when the
            sublayer is not the first of its block); the final read sees b_0 .. b_N, an
            incomplete last block contributing its partial sum.

A read with pseudo-query w and key-norm gain g over sources V (n, T, d) is
  z_i = w . KeyNorm_g(v_i) = ((w * g) . v_i) / sqrt(mean(v_i^2) + eps),
  alpha = softmax over the source axis,  h = sum_i alpha_i v_i;
reads r < L feed sublayer r + 1 (even r: attention of layer r/2, odd r: its MLP), read L feeds
the final RMSNorm and the LM head.  Everything is f32 under torch.no_grad() (PeerModel also
takes torch.float64, which check_peer.py uses against `attnres forward --precision f64`).

How the peer is written (its best honest eager form, PyTorch 1.13 has no fused attention):
projections are F.linear (one BLAS sgemm each, weights as stored, (out, in)); attention is one
batched matmul per kv-head group (the query heads that share a kv head are stacked, so GQA needs
no copies of K/V): baddbmm (additive causal mask + scaled Q K^T), softmax, bmm; depth reads
slice one preallocated (sources, T, d) buffer (torch.stack without the copy) and are vectorised
over the source axis.
The key norm is applied through the identity above (no (n, T, d) key tensor is materialised);
every read recomputes the RMS of each of its sources, as a plain per-read implementation does.

Token ids (shared with attnres so both sides run the same sequence):
  token(t) = ((1103515245 * (seed + t) + 12345) mod 2^31) mod vocab,   t = 0 .. T-1
(with unsigned 64-bit arithmetic the wrap-around is harmless, since 2^31 divides 2^64).

Timing: one warm-up forward pass, then --repeat K timed whole forward passes (embedding to
logits); seconds_per_forward is the median, tokens_per_second = T / seconds_per_forward.
--threads N sets torch.set_num_threads(N) and OpenBLAS's own thread count (PyTorch does not set
the latter).

Precision: --precision f32 (default) runs the f32 model as is; --precision bf16 runs the same f32
model and code inside torch.autocast("cpu", dtype=torch.bfloat16) (mixed precision: f32 weights,
autocast casts the inputs of its lower-precision ops -- F.linear, matmul, bmm, baddbmm -- to bf16
on every call; elementwise ops run in whatever dtype their inputs have, with the usual type
promotion, so bf16 * f32 is f32). torch.backends.mkldnn stays on: PyTorch 1.13 sends bf16
matmuls to oneDNN (f32 ones go to libblas.so.3, i.e. OpenBLAS). --op-dtypes runs one forward
pass under a dispatch-level logger and prints every ATen op with its input dtypes, calls and
time (and, with bf16, how far the bf16 logits are from the f32 ones): the evidence of what runs
in bf16.

Usage (use /usr/bin/python3, the Debian python with python3-torch):
  /usr/bin/python3 bench/peers/attnres_peer.py --model DIR --seq 256 --mode block --block-size 4 \
      --threads 1 --repeat 5 --format json
  /usr/bin/python3 bench/peers/attnres_peer.py --model DIR --seq 256 --precision bf16 --format json
  /usr/bin/python3 bench/peers/attnres_peer.py --model DIR --seq 64 --precision bf16 --op-dtypes
  /usr/bin/python3 bench/peers/attnres_peer.py --gemm-probe --threads 1 --format json
  /usr/bin/python3 bench/peers/attnres_peer.py --model DIR --tokens "1 2 3" --mode full \
      --logits-out logits.npy          # (for bench/peers/check_peer.py)
"""

import argparse
import collections
import contextlib
import ctypes
import json
import math
import os
import statistics
import struct
import sys
import time

ENGINE = "pytorch-eager"


# ----------------------------------------------------------------------------- tokens

def make_tokens(seed, count, vocab):
    """Deterministic pseudo-random token ids in [0, vocab) (see the module docstring)."""
    return [((1103515245 * (seed + t) + 12345) % (1 << 31)) % vocab for t in range(count)]


# ----------------------------------------------------------------------------- files

def read_safetensors(path, dtype=None):
    """name -> torch tensor of `dtype` (default float32).  Plain reader: 8-byte little-endian header length, a JSON
    header {name: {dtype, shape, data_offsets}}, then the raw little-endian data."""
    import numpy as np
    import torch

    with open(path, "rb") as f:
        blob = f.read()
    (header_len,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + header_len].decode("utf-8"))
    base = 8 + header_len
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        raw = blob[base + begin:base + end]
        kind = info["dtype"]
        if kind == "F32":
            array = np.frombuffer(raw, dtype="<f4")
        elif kind == "F64":
            array = np.frombuffer(raw, dtype="<f8")
        elif kind == "F16":
            array = np.frombuffer(raw, dtype="<f2").astype(np.float32)  # exact
        elif kind == "BF16":
            array = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            raise ValueError(f"{path}: tensor '{name}' has unsupported dtype {kind}")
        shape = [int(s) for s in info["shape"]]
        # One rounding from the stored values to the compute precision, as attnres does.
        tensor = torch.from_numpy(array.astype(np.float64, copy=True).reshape(shape))
        out[name] = tensor.to(dtype or torch.float32)
    return out


def read_config(directory):
    with open(os.path.join(directory, "config.json")) as f:
        root = json.load(f)
    attn_res = root.get("attn_res") or {}
    config = {
        "d": int(root["hidden_size"]),
        "layers": int(root["num_hidden_layers"]),
        "heads": int(root["num_attention_heads"]),
        "kv_heads": int(root.get("num_key_value_heads", root["num_attention_heads"])),
        "ffn": int(root["intermediate_size"]),
        "vocab": int(root["vocab_size"]),
        "rms_norm_eps": float(root.get("rms_norm_eps") or 1e-6),
        "rope_theta": float(root.get("rope_theta") or 10000.0),
        "mode": attn_res.get("mode", "standard"),
        "block_size": int(attn_res.get("block_size", 0)),
        "key_norm_eps": float(attn_res.get("key_norm_eps") or 1e-6),
    }
    if root.get("hidden_act", "silu") != "silu" or root.get("tie_word_embeddings", False):
        raise ValueError(f"{directory}: only silu and an untied LM head are supported")
    return config


# ----------------------------------------------------------------------------- model

class PeerModel:
    def __init__(self, directory, dtype=None):
        """dtype: torch.float32 (the default, what is timed) or torch.float64 (checks)."""
        import torch

        self.dtype = dtype = dtype or torch.float32
        self.config = c = read_config(directory)
        w = read_safetensors(os.path.join(directory, "model.safetensors"), dtype)
        self.head_dim = c["d"] // c["heads"]
        self.sublayers = 2 * c["layers"]
        self.embed = w["model.embed_tokens.weight"].contiguous()
        self.norm = w["model.norm.weight"]
        self.lm_head = w["lm_head.weight"].contiguous()
        self.layers = []
        for i in range(c["layers"]):
            p = f"model.layers.{i}."
            self.layers.append({
                "input_layernorm": w[p + "input_layernorm.weight"],
                "q": w[p + "self_attn.q_proj.weight"].contiguous(),
                "k": w[p + "self_attn.k_proj.weight"].contiguous(),
                "v": w[p + "self_attn.v_proj.weight"].contiguous(),
                "o": w[p + "self_attn.o_proj.weight"].contiguous(),
                "post_attention_layernorm": w[p + "post_attention_layernorm.weight"],
                "gate": w[p + "mlp.gate_proj.weight"].contiguous(),
                "up": w[p + "mlp.up_proj.weight"].contiguous(),
                "down": w[p + "mlp.down_proj.weight"].contiguous(),
            })
        # Depth reads r = 0 .. L: (pseudo-query w, key-norm gain g).  A file without AttnRes
        # tensors is a standard model: zero queries and unit gains (every read is a mean).
        names = []
        for i in range(c["layers"]):
            names += [f"model.layers.{i}.attn_res", f"model.layers.{i}.mlp_res"]
        names.append("model.final_res")
        d = c["d"]
        self.has_attn_res = all(n + ".query" in w for n in names)
        self.reads = []
        for n in names:
            if self.has_attn_res:
                query, gain = w[n + ".query"], w[n + ".key_norm.weight"]
            else:
                query, gain = torch.zeros(d, dtype=dtype), torch.ones(d, dtype=dtype)
            # Effective query w * g: w . KeyNorm_g(v) = ((w * g) . v) / rms_eps(v).
            self.reads.append((query * gain).contiguous())

    # -- layers (x: (T, d) f32)

    def rms_norm(self, x, gain, eps):
        return x * self.inverse_rms(x, eps).unsqueeze(-1) * gain

    @staticmethod
    def inverse_rms(x, eps):
        """1 / sqrt(mean(x^2) + eps) over the last axis."""
        import torch

        d = x.shape[-1]
        return torch.rsqrt(torch.linalg.vector_norm(x, dim=-1).square_().div_(d).add_(eps))

    def rope_tables(self, T):
        import torch

        hd = self.head_dim
        half = hd // 2
        # Inverse frequencies theta^(-2i/hd) and angles in double, as attnres does.
        inv_freq = self.config["rope_theta"] ** (-2.0 * torch.arange(half, dtype=torch.float64) / hd)
        angles = torch.arange(T, dtype=torch.float64).unsqueeze(1) * inv_freq  # (T, hd/2)
        cos = torch.cat([angles.cos(), angles.cos()], dim=-1).to(self.dtype)  # (T, hd)
        sin = torch.cat([angles.sin(), angles.sin()], dim=-1).to(self.dtype)
        return cos, sin

    @staticmethod
    def apply_rope(x, cos, sin):  # x: (T, heads, hd); cos, sin: (T, 1, hd)
        import torch

        half = x.shape[-1] // 2
        rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)  # rotate_half
        return x * cos + rotated * sin

    def attention(self, layer, x, cos, sin, mask):
        import torch
        import torch.nn.functional as F

        c = self.config
        T = x.shape[0]
        H, Hkv, hd = c["heads"], c["kv_heads"], self.head_dim
        group = H // Hkv
        q = self.apply_rope(F.linear(x, layer["q"]).view(T, H, hd), cos, sin)    # (T, H, hd)
        k = self.apply_rope(F.linear(x, layer["k"]).view(T, Hkv, hd), cos, sin)  # (T, Hkv, hd)
        v = F.linear(x, layer["v"]).view(T, Hkv, hd)
        # Query heads h = kv * group + j share kv head kv: one batched matmul per kv group.
        q = q.transpose(0, 1).reshape(Hkv, group * T, hd)
        k = k.transpose(0, 1)                                  # (Hkv, T, hd)
        v = v.transpose(0, 1)                                  # (Hkv, T, hd)
        # scores = mask + q k^T / sqrt(hd) in one baddbmm (mask: 0, or -inf above the diagonal)
        scores = torch.baddbmm(mask, q, k.transpose(1, 2), alpha=1.0 / math.sqrt(hd))
        probs = torch.softmax(scores, dim=-1)                  # (Hkv, group*T, T)
        context = torch.bmm(probs, v)                          # (Hkv, group*T, hd)
        context = context.view(H, T, hd).transpose(0, 1).reshape(T, H * hd)
        return F.linear(context, layer["o"])

    @staticmethod
    def mlp(layer, x):
        import torch.nn.functional as F

        return F.linear(F.silu(F.linear(x, layer["gate"])) * F.linear(x, layer["up"]), layer["down"])

    def sublayer(self, r, h, cos, sin, mask):
        layer = self.layers[r // 2]
        eps = self.config["rms_norm_eps"]
        if r % 2 == 0:
            return self.attention(layer, self.rms_norm(h, layer["input_layernorm"], eps), cos, sin, mask)
        return self.mlp(layer, self.rms_norm(h, layer["post_attention_layernorm"], eps))

    def depth_read(self, r, sources):
        """sources: (n, T, d) -> h (T, d): softmax over the source axis."""
        import torch

        inv_rms = self.inverse_rms(sources, self.config["key_norm_eps"])  # (n, T)
        scores = torch.matmul(sources, self.reads[r]) * inv_rms          # (n, T)
        alpha = torch.softmax(scores, dim=0)
        return (alpha.unsqueeze(-1) * sources).sum(0)

    # -- forward

    def forward(self, tokens, mode, block_size=0):
        """tokens: LongTensor (T) -> logits (T, vocab) in the model's dtype."""
        import torch
        import torch.nn.functional as F

        c = self.config
        L = self.sublayers
        T = tokens.shape[0]
        d = c["d"]
        cos, sin = self.rope_tables(T)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)  # (T, 1, hd)
        # Additive causal mask, one (T, T) block per query head of a kv group: (group*T, T).
        group = c["heads"] // c["kv_heads"]
        mask = torch.full((T, T), float("-inf"), dtype=self.dtype).triu_(1)
        if group > 1:
            mask = mask.repeat(group, 1)
        embedding = F.embedding(tokens, self.embed)  # (T, d)

        if mode == "standard":
            h = embedding
            for r in range(L):
                h = h + self.sublayer(r, h, cos, sin, mask)
        elif mode == "full":
            history = torch.empty(L + 1, T, d, dtype=self.dtype)  # v_0 .. v_L
            history[0] = embedding
            for r in range(L):
                h = self.depth_read(r, history[:r + 1])
                history[r + 1] = self.sublayer(r, h, cos, sin, mask)
            h = self.depth_read(L, history)
        elif mode == "block":
            S = block_size
            if not 1 <= S <= L:
                raise ValueError(f"block size S must be between 1 and L = {L}, got {S}")
            N = (L + S - 1) // S
            # Slots: b_0 = embedding, b_1 .. b_N; slot n accumulates block n while it is open.
            blocks = torch.zeros(N + 1, T, d, dtype=self.dtype)
            blocks[0] = embedding
            for r in range(L):
                sublayer = r + 1
                n = (sublayer - 1) // S + 1     # its block
                i = sublayer - (n - 1) * S      # position in the block, 1-based
                h = self.depth_read(r, blocks[:n + 1] if i >= 2 else blocks[:n])
                blocks[n] += self.sublayer(r, h, cos, sin, mask)
            h = self.depth_read(L, blocks)
        else:
            raise ValueError(f"unknown mode '{mode}' (expected standard, full or block)")
        return F.linear(self.rms_norm(h, self.norm, c["rms_norm_eps"]), self.lm_head)


# ----------------------------------------------------------------------------- BLAS

def blas_info():
    """What BLAS this process uses for sgemm (torch links libblas.so.3; on Debian that is an
    alternative, here normally OpenBLAS), and OpenBLAS's core type and threads."""
    loaded = set()
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split()[-1] if len(line.split()) >= 6 else ""
                base = os.path.basename(path)
                if "blas" in base or "lapack" in base or "mkl" in base:
                    loaded.add(os.path.realpath(path))
    except OSError:
        pass
    info = {
        "loaded": sorted(loaded),
        "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE"),
        "OPENBLAS_L2_SIZE": os.environ.get("OPENBLAS_L2_SIZE"),
    }
    openblas = [p for p in loaded if "openblas" in os.path.basename(p)]
    if openblas:
        try:
            lib = ctypes.CDLL(openblas[0])  # already loaded: the same instance torch uses
            lib.openblas_get_corename.restype = ctypes.c_char_p
            lib.openblas_get_config.restype = ctypes.c_char_p
            info["openblas_corename"] = lib.openblas_get_corename().decode()
            info["openblas_config"] = lib.openblas_get_config().decode().strip()
            info["openblas_num_threads"] = int(lib.openblas_get_num_threads())
        except (OSError, AttributeError):
            pass
    return info


def set_threads(n):
    import torch

    torch.set_num_threads(n)
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "openblas" in line}
        for path in paths:
            ctypes.CDLL(path).openblas_set_num_threads(n)
    except (OSError, AttributeError):
        pass


def gemm_probe(repeat, dtype=None):
    """Single GEMM rate: torch.mm of two 1024 x 1024 matrices of `dtype` (default f32: the
    sgemm of libblas.so.3; bf16: what autocast hands PyTorch 1.13, which runs it through oneDNN
    when torch.backends.mkldnn is on and the CPU has AVX-512), best of `repeat` x 3."""
    import torch

    n = 1024
    a, b = torch.randn(n, n), torch.randn(n, n)
    if dtype is not None:
        a, b = a.to(dtype), b.to(dtype)
    for _ in range(2):
        torch.mm(a, b)
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(3):
            torch.mm(a, b)
        best = min(best, (time.perf_counter() - start) / 3)
    return 2.0 * n ** 3 / best / 1e9


def gemm_probe_result(torch, threads, repeat=5):
    """The --gemm-probe JSON of both peers: the f32 and the bf16 1024^3 GEMM rates, and the
    dtype torch.mm of two f32 matrices gets under CPU autocast (bfloat16 when autocast reaches
    the matmuls)."""
    a = torch.randn(64, 64)
    with precision_context("bf16"):
        autocast_dtype = str(torch.mm(a, a).dtype).replace("torch.", "")
    return {"gemm_gflops": round(gemm_probe(repeat), 2),
            "gemm_gflops_bf16": round(gemm_probe(repeat, torch.bfloat16), 2),
            "autocast_mm_dtype": autocast_dtype, "threads": threads,
            "torch_version": torch.__version__, "blas": blas_info(),
            "torch_settings": torch_settings(torch)}


def print_gemm_probe(result):
    print(f"sgemm 1024^3: {result['gemm_gflops']:.1f} GFLOP/s, core {result['blas'].get('openblas_corename')}")
    print(f"bf16 mm 1024^3: {result['gemm_gflops_bf16']:.1f} GFLOP/s (mkldnn "
          f"{'on' if result['torch_settings']['mkldnn_enabled'] else 'off'}); "
          f"torch.mm of f32 matrices under CPU autocast gives {result['autocast_mm_dtype']}")


# ----------------------------------------------------------------------------- precision

PRECISIONS = ("f32", "bf16")


def precision_context(precision):
    """f32: nothing; bf16: torch.autocast("cpu", dtype=torch.bfloat16) -- f32 weights stay f32,
    autocast casts the inputs of its lower-precision ops (linear, matmul, mm, bmm, baddbmm, ...)
    to bf16 at each call."""
    import torch

    if precision == "bf16":
        return torch.autocast("cpu", dtype=torch.bfloat16)
    if precision not in ("f32", "f64"):
        raise ValueError(f"unknown precision '{precision}'")
    return contextlib.nullcontext()


def use_best_settings(torch):
    """The peer's settings beyond threads: oneDNN (mkldnn) on, which PyTorch 1.13 needs for fast
    bf16 matmuls (without it a bf16 mm falls back to a slow generic kernel)."""
    torch.backends.mkldnn.enabled = True


def torch_settings(torch):
    """mkldnn (oneDNN) state and ATen's vector ISA (ATEN_CPU_CAPABILITY: 1.13 defaults to AVX2
    even on AVX-512 CPUs; avx512 is opt-in), for the JSON."""
    capability = None
    for line in torch.__config__.show().splitlines():
        if "CPU capability usage:" in line:
            capability = line.split(":", 1)[1].strip()
    return {"mkldnn_available": bool(torch.backends.mkldnn.is_available()),
            "mkldnn_enabled": bool(torch.backends.mkldnn.enabled),
            "cpu_capability": capability,
            "ATEN_CPU_CAPABILITY": os.environ.get("ATEN_CPU_CAPABILITY")}


MATMUL_OPS = {"mm", "bmm", "baddbmm", "addmm", "addbmm", "addmv", "mv", "dot", "matmul", "linear"}


def op_dtype_logger():
    """A TorchDispatchMode that counts every ATen op reaching the kernels (below autocast, so
    after its casts) by (phase, op, input dtypes, output dtype), with the time spent in it."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    def dtypes(values):
        out = []
        for v in values:
            if isinstance(v, torch.Tensor):
                out.append(str(v.dtype).replace("torch.", "").replace("bfloat16", "bf16")
                           .replace("float32", "f32").replace("float64", "f64"))
            elif isinstance(v, (list, tuple)):
                out.extend(dtypes(v))
        return out

    class OpDtypeLog(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.phase = "forward"
            self.calls = collections.Counter()
            self.seconds = collections.Counter()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            start = time.perf_counter()
            out = func(*args, **(kwargs or {}))
            elapsed = time.perf_counter() - start
            key = (self.phase, func.overloadpacket.__name__,
                   ",".join(dtypes(args)) or "-",
                   ",".join(dtypes(out if isinstance(out, (list, tuple)) else [out])) or "-")
            self.calls[key] += 1
            self.seconds[key] += elapsed
            return out

        def rows(self):
            """[{phase, op, inputs, output, calls, seconds, matmul}], matmuls first, by time."""
            rows = [{"phase": k[0], "op": k[1], "inputs": k[2], "output": k[3],
                     "calls": n, "seconds": self.seconds[k], "matmul": k[1] in MATMUL_OPS}
                    for k, n in self.calls.items()]
            return sorted(rows, key=lambda r: (r["phase"] != "forward", not r["matmul"], -r["seconds"]))

        def summary(self):
            """Per phase: matmul calls by output dtype, and the share of time in dtype casts."""
            out = {}
            for r in self.rows():
                s = out.setdefault(r["phase"], {"matmul_calls": {}, "seconds": 0.0, "cast_seconds": 0.0})
                s["seconds"] += r["seconds"]
                if r["matmul"]:
                    s["matmul_calls"][r["output"]] = s["matmul_calls"].get(r["output"], 0) + r["calls"]
                if r["op"] == "_to_copy":
                    s["cast_seconds"] += r["seconds"]
            return out

    return OpDtypeLog()


def print_op_dtypes(log, title):
    print(title)
    print(f"  {'phase':<9} {'op':<28} {'input dtypes':<34} {'output':<10} {'calls':>6} {'ms':>9}")
    for r in log.rows():
        print(f"  {r['phase']:<9} {r['op']:<28} {r['inputs'][:34]:<34} {r['output'][:10]:<10} "
              f"{r['calls']:>6} {r['seconds'] * 1e3:>9.2f}")
    for phase, s in log.summary().items():
        calls = ", ".join(f"{n} {dtype}" for dtype, n in sorted(s["matmul_calls"].items())) or "none"
        print(f"  {phase}: matmul-class calls {calls}; dtype casts (_to_copy) "
              f"{s['cast_seconds'] * 1e3:.1f} of {s['seconds'] * 1e3:.1f} ms in ops")


# ----------------------------------------------------------------------------- main

def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", help="model directory (config.json + model.safetensors)")
    parser.add_argument("--seq", type=int, default=256, help="tokens T (default 256)")
    parser.add_argument("--tokens", help="explicit token ids instead of --seq/--tokens-seed")
    parser.add_argument("--mode", choices=["standard", "full", "block"],
                        help="residual scheme (default: the model's attn_res.mode)")
    parser.add_argument("--block-size", type=int, default=0,
                        help="Block AttnRes block size S (default: the model's)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=5, help="timed forward passes")
    parser.add_argument("--tokens-seed", type=int, default=0)
    parser.add_argument("--format", choices=["json", "text"], default="text")
    parser.add_argument("--logits-out", help="run once and write the logits (T, vocab) as .npy")
    parser.add_argument("--precision", choices=PRECISIONS, default="f32",
                        help="f32, or bf16: the f32 model under torch.autocast('cpu', "
                             "dtype=torch.bfloat16) (default f32)")
    parser.add_argument("--op-dtypes", action="store_true",
                        help="run one forward pass and print every ATen op with its dtypes "
                             "(what autocast runs in bf16), then exit")
    parser.add_argument("--gemm-probe", action="store_true",
                        help="only measure the 1024^3 GEMM rates (f32 sgemm and bf16, GFLOP/s) "
                             "and the BLAS in use")
    args = parser.parse_args(argv)
    if args.threads < 1 or args.repeat < 1:
        parser.error("--threads and --repeat must be >= 1")

    # OpenBLAS reads its thread count when it loads, i.e. when torch is imported.
    os.environ["OPENBLAS_NUM_THREADS"] = str(args.threads)
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    import torch

    set_threads(args.threads)
    use_best_settings(torch)
    torch.set_grad_enabled(False)

    if args.gemm_probe:
        result = gemm_probe_result(torch, args.threads)
        if args.format == "json":
            print(json.dumps(result))
        else:
            print_gemm_probe(result)
        return 0

    if not args.model:
        parser.error("--model is required")
    model = PeerModel(args.model)
    c = model.config
    mode = args.mode or c["mode"]
    block_size = args.block_size or c["block_size"]
    if args.tokens is not None:
        ids = [int(t) for t in args.tokens.replace(",", " ").split()]
    else:
        ids = make_tokens(args.tokens_seed, args.seq, c["vocab"])
    if not ids or min(ids) < 0 or max(ids) >= c["vocab"]:
        parser.error(f"token ids must be in [0, {c['vocab']})")
    tokens = torch.tensor(ids, dtype=torch.long)
    T = len(ids)

    def forward():  # one whole forward pass in the chosen precision (autocast for bf16)
        with precision_context(args.precision):
            return model.forward(tokens, mode, block_size)

    with torch.no_grad():
        if args.logits_out:
            import numpy as np

            np.save(args.logits_out, forward().float().numpy())
            return 0
        if args.op_dtypes:
            forward()  # warm-up, so that the logged times are not first-call times
            log = op_dtype_logger()
            with log:
                logits = forward()
            reference = model.forward(tokens, mode, block_size)  # f32
            difference = float((logits.float() - reference).abs().max() / reference.abs().max())
            if args.format == "json":
                print(json.dumps({"precision": args.precision, "mode": mode, "tokens": T,
                                  "logits_dtype": str(logits.dtype), "ops": log.rows(),
                                  "summary": log.summary(),
                                  "max_rel_difference_vs_f32": difference,
                                  "torch_version": torch.__version__,
                                  "torch_settings": torch_settings(torch)}))
            else:
                print_op_dtypes(log, f"{ENGINE} {mode} T={T} precision {args.precision}: ATen ops "
                                     f"of one forward pass (logits {logits.dtype})")
                print(f"  max |logits - f32 logits| / max |f32 logits| = {difference:.2e}")
            return 0
        forward()  # warm-up
        times = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            logits = forward()
            times.append(time.perf_counter() - start)
        assert logits.shape == (T, c["vocab"])

    seconds = statistics.median(times)
    result = {
        "tokens_per_second": T / seconds,
        "seconds_per_forward": seconds,
        "threads": args.threads,
        "precision": args.precision,
        "autocast": "cpu bfloat16" if args.precision == "bf16" else None,
        "logits_dtype": str(logits.dtype).replace("torch.", ""),
        "engine": ENGINE,
        "device": "cpu",
        "mode": mode,
        "block_size": block_size if mode == "block" else None,
        "tokens": T,
        "repeat": args.repeat,
        "seconds_min": min(times),
        "torch_version": torch.__version__,
        "torch_num_threads": torch.get_num_threads(),
        "torch_settings": torch_settings(torch),
        "blas": blas_info(),
    }
    if args.format == "json":
        print(json.dumps(result))
    else:
        print(f"{ENGINE} {mode}{' S=%d' % block_size if mode == 'block' else ''} T={T} "
              f"threads={args.threads} {args.precision}: {result['tokens_per_second']:.0f} tokens/s "
              f"({seconds * 1e3:.1f} ms per forward, median of {args.repeat}; "
              f"BLAS core {result['blas'].get('openblas_corename')})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
