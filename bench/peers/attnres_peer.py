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

Usage (use /usr/bin/python3, the Debian python with python3-torch):
  /usr/bin/python3 bench/peers/attnres_peer.py --model DIR --seq 256 --mode block --block-size 4 \
      --threads 1 --repeat 5 --format json
  /usr/bin/python3 bench/peers/attnres_peer.py --gemm-probe --threads 1 --format json
  /usr/bin/python3 bench/peers/attnres_peer.py --model DIR --tokens "1 2 3" --mode full \
      --logits-out logits.npy          # (for bench/peers/check_peer.py)
"""

import argparse
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


def gemm_probe(repeat):
    """Single sgemm rate: torch.mm of two 1024 x 1024 f32 matrices, best of `repeat` x 3."""
    import torch

    n = 1024
    a, b = torch.randn(n, n), torch.randn(n, n)
    for _ in range(2):
        torch.mm(a, b)
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(3):
            torch.mm(a, b)
        best = min(best, (time.perf_counter() - start) / 3)
    return 2.0 * n ** 3 / best / 1e9


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
    parser.add_argument("--gemm-probe", action="store_true",
                        help="only measure the 1024^3 sgemm rate (GFLOP/s) and the BLAS in use")
    args = parser.parse_args(argv)
    if args.threads < 1 or args.repeat < 1:
        parser.error("--threads and --repeat must be >= 1")

    # OpenBLAS reads its thread count when it loads, i.e. when torch is imported.
    os.environ["OPENBLAS_NUM_THREADS"] = str(args.threads)
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    import torch

    set_threads(args.threads)
    torch.set_grad_enabled(False)

    if args.gemm_probe:
        gflops = gemm_probe(5)
        result = {"gemm_gflops": round(gflops, 2), "threads": args.threads,
                  "torch_version": torch.__version__, "blas": blas_info()}
        if args.format == "json":
            print(json.dumps(result))
        else:
            print(f"sgemm 1024^3: {gflops:.1f} GFLOP/s, core {result['blas'].get('openblas_corename')}")
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

    with torch.no_grad():
        if args.logits_out:
            import numpy as np

            np.save(args.logits_out, model.forward(tokens, mode, block_size).numpy())
            return 0
        model.forward(tokens, mode, block_size)  # warm-up
        times = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            logits = model.forward(tokens, mode, block_size)
            times.append(time.perf_counter() - start)
        assert logits.shape == (T, c["vocab"])

    seconds = statistics.median(times)
    result = {
        "tokens_per_second": T / seconds,
        "seconds_per_forward": seconds,
        "threads": args.threads,
        "engine": ENGINE,
        "device": "cpu",
        "mode": mode,
        "block_size": block_size if mode == "block" else None,
        "tokens": T,
        "repeat": args.repeat,
        "seconds_min": min(times),
        "torch_version": torch.__version__,
        "torch_num_threads": torch.get_num_threads(),
        "blas": blas_info(),
    }
    if args.format == "json":
        print(json.dumps(result))
    else:
        print(f"{ENGINE} {mode}{' S=%d' % block_size if mode == 'block' else ''} T={T} "
              f"threads={args.threads}: {result['tokens_per_second']:.0f} tokens/s "
              f"({seconds * 1e3:.1f} ms per forward, median of {args.repeat}; "
              f"BLAS core {result['blas'].get('openblas_corename')})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
