#!/usr/bin/python3
"""Independent NumPy reference for Hugging Face checkpoints in the Kimi K3 layout (issue 31).

Written from the layout description (docs/interop.md), not from the project's C++ code. It builds
small K3-layout checkpoints (config.json + safetensors, single file or sharded with an index) and
their expected outputs, computed in float64 from the stored weights, and commits them as fixtures
that the C++ importer tests load.

    /usr/bin/python3 tests/interop/k3_reference.py --out tests/interop/fixtures
    /usr/bin/python3 tests/interop/k3_reference.py --check tests/interop/fixtures

`--out` writes every case; a file that already reproduces (weights and JSON byte-identical,
expected values within 1e-12) is left alone, so that another NumPy or BLAS does not churn the
committed fixtures (`--force` rewrites everything). `--check` regenerates into a temporary folder
and compares: weight files, the shard index, config.json and case.json must be byte-identical,
expected.safetensors and stats.json equal within 1e-12 (|a − b| <= 1e-12 · max(1, |b|)); it exits 1
with a message naming the differing file and tensor. Both modes first run the self-checks of
`self_checks()`. Needs only python3-numpy (Debian); the safetensors reader and writer are here.

The layout
----------
config.json holds the standard Hugging Face keys (`architectures` LlamaForCausalLM or
Qwen3ForCausalLM, `model_type`, `hidden_size` d, `intermediate_size` F, `num_hidden_layers`,
`num_attention_heads` H, `num_key_value_heads` H_kv, `head_dim` hd, `vocab_size` V,
`rms_norm_eps`, `rope_theta`, `tie_word_embeddings`, `torch_dtype`, `max_position_embeddings`,
`hidden_act` = silu, `attention_bias` = false) plus `attn_res_block_size`: the AttnRes block size
b in DECODER LAYERS (S = 2b sublayers in the lab's terms), or null for the standard residual.

Tensors use the nn.Linear convention (weight [out, in], y = x Wᵀ): `model.embed_tokens.weight`
[V, d], `lm_head.weight` [V, d] (absent when tied), `model.norm.weight` [d]; per layer i under
`model.layers.{i}.`: `input_layernorm.weight` [d], `self_attn.{q,k,v,o}_proj.weight` ([H·hd, d],
[H_kv·hd, d], [H_kv·hd, d], [d, H·hd]), Qwen3's `self_attn.q_norm.weight` / `k_norm.weight` [hd],
`post_attention_layernorm.weight` [d], `mlp.{gate,up,down}_proj.weight` ([F, d], [F, d], [d, F]);
AttnRes: `self_attention_res_norm.weight` [d] and `self_attention_res_proj.weight` [1, d] (the
read before attention), `mlp_res_norm.weight` [d] and `mlp_res_proj.weight` [1, d] (the read
before the MLP), and the final read `model.output_attn_res_norm.weight` [d],
`model.output_attn_res_proj.weight` [1, d].

A read over sources v_1..v_n with norm gain g and projection p scores
score_j = (g ⊙ p[0]) · v_j / sqrt(mean(v_j²) + eps) (eps = rms_norm_eps; the gain is multiplied
into the query), α = softmax_j(score), output Σ_j α_j v_j. The sources are the completed block
summaries (the embedding first) and the running partial sum of the current block (last); a new
block starts at layer i when i > 0 and i % b == 0, and the attention read of a block's first
layer has no partial sum yet. See forward_k3().

The cases (FIXTURE_CASES; d = 16, H = 4, H_kv = 2, F = 40, V = 256, rope_theta = 10000,
eps = 1e-6; tokens = the UTF-8 bytes of TEXT, T = 14)
- k3_llama_f32: Llama, 3 layers, b = 2 (the last block holds one layer), F32, one file, untied,
  head_dim written (4).
- k3_llama_b1_f16: Llama, 2 layers, b = 1 (every layer its own block), F16, one file, untied,
  head_dim NOT written (the reader must derive d/H = 4).
- k3_qwen3_bf16: Qwen3 with q_norm/k_norm, head_dim = 8 (H·hd = 32 ≠ d), tied embeddings (no
  lm_head.weight), 4 layers, b = 2 (two complete blocks), BF16, one file.
- k3_qwen3_bf16_sharded: the same tensors, byte for byte, over model-0000{1,2,3}-of-00003
  .safetensors with model.safetensors.index.json; same expected outputs.
- llama_standard_bf16: Llama, 2 layers, attn_res_block_size null, no AttnRes tensors, BF16.

Files per case: config.json, the weights, case.json ({tokens, text, description, layout "k3",
dtype (the safetensors code: F32, F16, BF16), sharded, block_size_layers, block_size_sublayers,
weight_files}), expected.safetensors (F64: `logits` [T, V], `hidden_final` [T, d] — the final
read's output, or for the standard case the last residual sum, before model.norm — and for
AttnRes cases `alpha.<r>` [T, n_sources] for r = 0..2·n_layers: r = 2i layer i's attention read,
2i+1 its MLP read, 2·n_layers the final read) and, for AttnRes cases, stats.json
({"reads": [{read, kind, layer, n_sources, sources, normalised_entropy, effective_sources,
top1_mass, embedding_weight, recent_weight}, ...]}; token means; normalised_entropy is null when
n_sources = 1). Source labels follow the lab's trace labels: `emb`, `b<n>` (completed block n,
1-based), `partial` (the running sum of the current block). At the final read the last source
is the last block's sum: `b<N>` when that block is complete (docs/math.md's example: final read
`[emb, b1, b2]`), `partial` when it is not (k3_llama_f32).

Choices
-------
- Weights: generated in float64 with np.random.default_rng(seed) in the order of make_weights(),
  then stored in the case's dtype: F32 by float64 → float32 rounding, F16 by numpy's float64 →
  float16 conversion, BF16 from the float32 value by round-to-nearest-even on the upper 16 bits
  (uint32 arithmetic, bf16_bits()). Every forward pass reads the stored values back, exactly.
  Distributions: projections (and an untied lm_head) N(0, 0.2²), embeddings N(0, 0.5²), norm
  gains (input/post-attention/final norm, q_norm, k_norm) 1 + N(0, 0.1²), AttnRes proj weights
  N(0, 0.5²), AttnRes norm weights 1 + N(0, 0.2²): the reads are far from uniform.
- RoPE positions are 0..T−1; inv_freq_j = theta^(−2j/hd) in float64; Qwen3's q_norm/k_norm act
  per head over hd, before RoPE, with eps = rms_norm_eps.
- Safetensors files: header `{"__metadata__": {"format": "pt"}, tensors...}` as compact JSON,
  tensors in name order, padded with spaces to a multiple of 8. The sharded case follows the
  layer order: shard 1 holds the embedding, layer 0 and layer 1's attention-side tensors, shard 2
  the rest of layer 1 and layer 2, shard 3 layer 3, model.norm and the final read — so one layer
  is split across two shards, as size-based Hugging Face sharding does; `total_size` is the sum
  of tensor data bytes (headers not counted).
- config.json also writes `attention_bias: false` (both Hugging Face classes have that key); no
  other keys beyond the layout's list.
"""
import argparse
import json
import math
import os
import shutil
import struct
import sys
import tempfile

import numpy as np

TEXT = "AttnRes reads!"
TOKENS = list(TEXT.encode("utf-8"))
TOL = 1e-12

# ---------------------------------------------------------------- dtypes

DTYPE_SIZE = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2}
TORCH_DTYPE = {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}


def bf16_bits(x):
    """float32 values → bf16 bit patterns (uint16), round to nearest, ties to even."""
    f = np.ascontiguousarray(np.asarray(x, dtype=np.float64).astype(np.float32))
    assert np.all(np.isfinite(f)), "bf16_bits: non-finite input"
    bits = f.view(np.uint32)
    lsb = (bits >> np.uint32(16)) & np.uint32(1)
    rounded = bits + np.uint32(0x7FFF) + lsb  # no wrap for finite values (max 0xFF807FFF)
    return (rounded >> np.uint32(16)).astype(np.uint16)


def bf16_values(bits):
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)


def encode(x, dtype):
    """float64 array → little-endian bytes of dtype."""
    x = np.asarray(x, dtype=np.float64)
    if dtype == "F64":
        return np.ascontiguousarray(x, dtype="<f8").tobytes()
    if dtype == "F32":
        return np.ascontiguousarray(x.astype("<f4")).tobytes()
    if dtype == "F16":
        h = x.astype("<f2")
        assert np.all(np.isfinite(h)), "F16 overflow"
        return np.ascontiguousarray(h).tobytes()
    if dtype == "BF16":
        return np.ascontiguousarray(bf16_bits(x).astype("<u2")).tobytes()
    raise ValueError(f"unknown dtype {dtype}")


def decode(raw, dtype, shape):
    """bytes of dtype → float64 array (exact)."""
    if dtype == "F64":
        a = np.frombuffer(raw, dtype="<f8")
    elif dtype == "F32":
        a = np.frombuffer(raw, dtype="<f4")
    elif dtype == "F16":
        a = np.frombuffer(raw, dtype="<f2")
    elif dtype == "BF16":
        a = bf16_values(np.frombuffer(raw, dtype="<u2"))
    else:
        raise ValueError(f"unknown dtype {dtype}")
    return a.astype(np.float64).reshape(shape)


def stored(x, dtype):
    """The float64 value a tensor has once written as dtype."""
    x = np.asarray(x, dtype=np.float64)
    return decode(encode(x, dtype), dtype, x.shape)


# ---------------------------------------------------------------- safetensors

def safetensors_bytes(tensors, dtype):
    """tensors: {name: float64 array}, written in name order with one dtype → file bytes."""
    header = {"__metadata__": {"format": "pt"}}
    blobs, offset = [], 0
    for name in sorted(tensors):
        array = np.asarray(tensors[name])
        blob = encode(array, dtype)
        header[name] = {"dtype": dtype, "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def write_safetensors(path, tensors, dtype):
    with open(path, "wb") as f:
        f.write(safetensors_bytes(tensors, dtype))


def parse_safetensors(data, what="safetensors"):
    """File bytes → {name: (dtype, shape, raw bytes)}, validating the header."""
    if len(data) < 8:
        raise ValueError(f"{what}: shorter than the 8-byte header length")
    (n,) = struct.unpack("<Q", data[:8])
    if 8 + n > len(data):
        raise ValueError(f"{what}: header length {n} past the end of the file")
    header = json.loads(data[8:8 + n].decode("utf-8"))
    body = data[8 + n:]
    out, spans = {}, []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype, shape = info["dtype"], info["shape"]
        begin, end = info["data_offsets"]
        if dtype not in DTYPE_SIZE:
            raise ValueError(f"{what}: tensor {name}: unknown dtype {dtype}")
        if not 0 <= begin <= end <= len(body):
            raise ValueError(f"{what}: tensor {name}: offsets {begin}..{end} outside the data")
        if end - begin != int(np.prod(shape, dtype=np.int64)) * DTYPE_SIZE[dtype]:
            raise ValueError(f"{what}: tensor {name}: {end - begin} bytes for shape {shape}")
        spans.append((begin, end))
        out[name] = (dtype, list(shape), bytes(body[begin:end]))
    spans.sort()
    if spans and (spans[0][0] != 0 or spans[-1][1] != len(body)
                  or any(a[1] != b[0] for a, b in zip(spans, spans[1:]))):
        raise ValueError(f"{what}: the tensors do not tile the data section")
    return out


def read_safetensors(path):
    """{name: float64 array}."""
    with open(path, "rb") as f:
        parsed = parse_safetensors(f.read(), path)
    return {k: decode(raw, dt, shape) for k, (dt, shape, raw) in parsed.items()}


def load_checkpoint(case_dir):
    """{name: (dtype, shape, raw)} of a single-file or sharded checkpoint."""
    index_path = os.path.join(case_dir, "model.safetensors.index.json")
    if os.path.exists(index_path):
        with open(index_path) as f:
            index = json.load(f)
        out = {}
        for shard in sorted(set(index["weight_map"].values())):
            with open(os.path.join(case_dir, shard), "rb") as f:
                parsed = parse_safetensors(f.read(), shard)
            for name, value in parsed.items():
                assert index["weight_map"].get(name) == shard, f"{shard}: {name} not mapped here"
                assert name not in out, f"{name} in two shards"
                out[name] = value
        assert set(out) == set(index["weight_map"]), "index names a tensor no shard holds"
        total = sum(len(raw) for _, _, raw in out.values())
        assert index["metadata"]["total_size"] == total, "total_size is not the sum of data bytes"
        return out
    with open(os.path.join(case_dir, "model.safetensors"), "rb") as f:
        return parse_safetensors(f.read(), "model.safetensors")


def checkpoint_values(parsed):
    return {k: decode(raw, dt, shape) for k, (dt, shape, raw) in parsed.items()}


# ---------------------------------------------------------------- model

def dims(cfg):
    d, H = cfg["hidden_size"], cfg["num_attention_heads"]
    hd = cfg.get("head_dim") or d // H
    return dict(d=d, H=H, Hkv=cfg["num_key_value_heads"], hd=hd, F=cfg["intermediate_size"],
                V=cfg["vocab_size"], n=cfg["num_hidden_layers"], eps=cfg["rms_norm_eps"],
                theta=cfg["rope_theta"], qwen3=cfg["model_type"] == "qwen3",
                tied=cfg["tie_word_embeddings"], b=cfg["attn_res_block_size"])


def make_weights(rng, cfg):
    """float64 weights, drawn in a fixed order (the order of this function)."""
    m = dims(cfg)
    d, H, Hkv, hd, F, V = m["d"], m["H"], m["Hkv"], m["hd"], m["F"], m["V"]
    k3 = m["b"] is not None
    W = {}

    def proj(*shape):
        return rng.normal(0.0, 0.2, shape)

    def gain(size, std=0.1):
        return 1.0 + rng.normal(0.0, std, size)

    W["model.embed_tokens.weight"] = rng.normal(0.0, 0.5, (V, d))
    for i in range(m["n"]):
        p = f"model.layers.{i}."
        if k3:
            W[p + "self_attention_res_norm.weight"] = gain(d, 0.2)
            W[p + "self_attention_res_proj.weight"] = rng.normal(0.0, 0.5, (1, d))
        W[p + "input_layernorm.weight"] = gain(d)
        W[p + "self_attn.q_proj.weight"] = proj(H * hd, d)
        W[p + "self_attn.k_proj.weight"] = proj(Hkv * hd, d)
        W[p + "self_attn.v_proj.weight"] = proj(Hkv * hd, d)
        W[p + "self_attn.o_proj.weight"] = proj(d, H * hd)
        if m["qwen3"]:
            W[p + "self_attn.q_norm.weight"] = gain(hd)
            W[p + "self_attn.k_norm.weight"] = gain(hd)
        if k3:
            W[p + "mlp_res_norm.weight"] = gain(d, 0.2)
            W[p + "mlp_res_proj.weight"] = rng.normal(0.0, 0.5, (1, d))
        W[p + "post_attention_layernorm.weight"] = gain(d)
        W[p + "mlp.gate_proj.weight"] = proj(F, d)
        W[p + "mlp.up_proj.weight"] = proj(F, d)
        W[p + "mlp.down_proj.weight"] = proj(d, F)
    if k3:
        W["model.output_attn_res_norm.weight"] = gain(d, 0.2)
        W["model.output_attn_res_proj.weight"] = rng.normal(0.0, 0.5, (1, d))
    W["model.norm.weight"] = gain(d)
    if not m["tied"]:
        W["lm_head.weight"] = proj(V, d)
    return W


def rmsnorm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rotate_half(x):
    half = x.shape[-1] // 2
    return np.concatenate([-x[..., half:], x[..., :half]], axis=-1)


def rope(x, theta):
    """x: [heads, T, hd]; Hugging Face rotate_half RoPE at positions 0..T−1."""
    T, hd = x.shape[-2], x.shape[-1]
    inv_freq = theta ** (-(2.0 * np.arange(hd // 2)) / hd)
    angle = np.arange(T, dtype=np.float64)[:, None] * inv_freq[None, :]
    cos = np.concatenate([np.cos(angle)] * 2, axis=-1)
    sin = np.concatenate([np.sin(angle)] * 2, axis=-1)
    return x * cos + rotate_half(x) * sin


def softmax_rows(z):
    z = z - np.max(z, axis=-1, keepdims=True)
    e = np.exp(z)
    return e / np.sum(e, axis=-1, keepdims=True)


def attention(W, m, i, h):
    p = f"model.layers.{i}."
    T = h.shape[0]
    H, Hkv, hd, eps = m["H"], m["Hkv"], m["hd"], m["eps"]
    x = rmsnorm(h, W[p + "input_layernorm.weight"], eps)
    q = (x @ W[p + "self_attn.q_proj.weight"].T).reshape(T, H, hd).transpose(1, 0, 2)
    k = (x @ W[p + "self_attn.k_proj.weight"].T).reshape(T, Hkv, hd).transpose(1, 0, 2)
    v = (x @ W[p + "self_attn.v_proj.weight"].T).reshape(T, Hkv, hd).transpose(1, 0, 2)
    if m["qwen3"]:
        q = rmsnorm(q, W[p + "self_attn.q_norm.weight"], eps)
        k = rmsnorm(k, W[p + "self_attn.k_norm.weight"], eps)
    q, k = rope(q, m["theta"]), rope(k, m["theta"])
    group = H // Hkv
    causal = np.tril(np.ones((T, T), dtype=bool))
    out = np.zeros((H, T, hd))
    for head in range(H):
        kv = head // group
        s = q[head] @ k[kv].T / math.sqrt(hd)
        s = np.where(causal, s, -np.inf)
        out[head] = softmax_rows(s) @ v[kv]
    return out.transpose(1, 0, 2).reshape(T, H * hd) @ W[p + "self_attn.o_proj.weight"].T


def silu(z):
    return z / (1.0 + np.exp(-z))


def mlp(W, m, i, h):
    p = f"model.layers.{i}."
    x = rmsnorm(h, W[p + "post_attention_layernorm.weight"], m["eps"])
    gate = x @ W[p + "mlp.gate_proj.weight"].T
    up = x @ W[p + "mlp.up_proj.weight"].T
    return (silu(gate) * up) @ W[p + "mlp.down_proj.weight"].T


def lm_head(W, m):
    return W["model.embed_tokens.weight"] if m["tied"] else W["lm_head.weight"]


def depth_read(sources, g, p, eps):
    """One K3 read: sources list of [T, d]; g [d]; p [1, d] → (output [T, d], α [T, n])."""
    V = np.stack(sources)                                          # [n, T, d]
    keys = V / np.sqrt(np.mean(V * V, axis=-1, keepdims=True) + eps)
    query = g * p[0]
    alpha = softmax_rows(np.einsum("ntd,d->tn", keys, query))      # [T, n]
    return np.einsum("tn,ntd->td", alpha, V), alpha


def forward_k3(W, cfg, tokens):
    """The K3 AttnRes forward pass: logits, hidden_final, [α of each read], [source labels]."""
    m = dims(cfg)
    b, eps = m["b"], m["eps"]
    emb = W["model.embed_tokens.weight"][tokens]
    completed, labels = [emb], ["emb"]
    partial = None
    alphas, read_labels = [], []

    def read(sources, src_labels, prefix):
        h, a = depth_read(sources, W[prefix + "_norm.weight"], W[prefix + "_proj.weight"], eps)
        alphas.append(a)
        read_labels.append(list(src_labels))
        return h

    for i in range(m["n"]):
        if i > 0 and i % b == 0:
            completed.append(partial)
            labels.append(f"b{len(completed) - 1}")
            partial = None
        p = f"model.layers.{i}."
        if partial is None:
            h = read(completed, labels, p + "self_attention_res")
        else:
            h = read(completed + [partial], labels + ["partial"], p + "self_attention_res")
        a = attention(W, m, i, h)
        partial = a if partial is None else partial + a
        h = read(completed + [partial], labels + ["partial"], p + "mlp_res")
        partial = partial + mlp(W, m, i, h)
    # The lab's label for the last block at the final read: b<N> when it is complete, else partial.
    last = f"b{len(completed)}" if m["n"] % b == 0 else "partial"
    h = read(completed + [partial], labels + [last], "model.output_attn_res")
    logits = rmsnorm(h, W["model.norm.weight"], eps) @ lm_head(W, m).T
    return logits, h, alphas, read_labels


def forward_standard(W, cfg, tokens):
    m = dims(cfg)
    h = W["model.embed_tokens.weight"][tokens]
    for i in range(m["n"]):
        h = h + attention(W, m, i, h)
        h = h + mlp(W, m, i, h)
    return rmsnorm(h, W["model.norm.weight"], m["eps"]) @ lm_head(W, m).T, h


# ---------------------------------------------------------------- second implementations (checks)

def attention_loops(W, m, i, h):
    """Per-token, per-head attention with RoPE as explicit pair rotations (j, j + hd/2)."""
    p = f"model.layers.{i}."
    T, H, Hkv, hd, eps = h.shape[0], m["H"], m["Hkv"], m["hd"], m["eps"]
    half = hd // 2
    Wq, Wk, Wv = (W[p + f"self_attn.{n}_proj.weight"] for n in "qkv")

    def per_head(vec, head, norm):
        x = vec[head * hd:(head + 1) * hd].copy()
        if m["qwen3"]:
            x = x / math.sqrt(float(np.mean(x * x)) + eps) * W[p + f"self_attn.{norm}.weight"]
        return x

    def rotate(x, pos):
        y = np.empty_like(x)
        for j in range(half):
            ang = pos * m["theta"] ** (-2.0 * j / hd)
            c, s = math.cos(ang), math.sin(ang)
            y[j] = x[j] * c - x[j + half] * s
            y[j + half] = x[j + half] * c + x[j] * s
        return y

    qs, ks, vs = [], [], []
    for t in range(T):
        row = h[t] / math.sqrt(float(np.mean(h[t] * h[t])) + eps) * W[p + "input_layernorm.weight"]
        q, k, v = Wq @ row, Wk @ row, Wv @ row
        qs.append([rotate(per_head(q, hh, "q_norm"), t) for hh in range(H)])
        ks.append([rotate(per_head(k, hh, "k_norm"), t) for hh in range(Hkv)])
        vs.append([v[hh * hd:(hh + 1) * hd] for hh in range(Hkv)])
    out = np.zeros((T, m["d"]))
    for t in range(T):
        concat = []
        for hh in range(H):
            kv = hh * Hkv // H
            s = np.array([qs[t][hh] @ ks[u][kv] for u in range(t + 1)]) / math.sqrt(hd)
            a = np.exp(s - s.max())
            a /= a.sum()
            concat.append(sum(a[u] * vs[u][kv] for u in range(t + 1)))
        out[t] = W[p + "self_attn.o_proj.weight"] @ np.concatenate(concat)
    return out


def forward_standard_unrolled(W, cfg, tokens):
    """The standard residual as h_l = v_0 + … + v_{l−1}, with the loop attention."""
    m = dims(cfg)
    outputs = [W["model.embed_tokens.weight"][tokens]]
    for i in range(m["n"]):
        outputs.append(attention_loops(W, m, i, sum(outputs)))
        outputs.append(mlp(W, m, i, sum(outputs)))
    h = sum(outputs)
    return rmsnorm(h, W["model.norm.weight"], m["eps"]) @ lm_head(W, m).T


def forward_lab_block(W, cfg, tokens):
    """The same model as the lab's Block AttnRes with S = 2b sublayers (docs/math.md, Block
    AttnRes): read r (input of sublayer r + 1, 1-based) sees b_0 … b_{n−1} and, from the 2nd
    sublayer of block n on, the partial sum of block n; the final read b_0 … b_N. Per-token loops."""
    m = dims(cfg)
    L, S, eps = 2 * m["n"], 2 * m["b"], m["eps"]
    T = len(tokens)
    v = [W["model.embed_tokens.weight"][tokens]]     # v[0] = embedding, v[l] = output of sublayer l

    def prefix(r):
        if r == L:
            return "model.output_attn_res"
        return f"model.layers.{r // 2}." + ("self_attention_res" if r % 2 == 0 else "mlp_res")

    def sources(r):
        if r == L:
            N = -(-L // S)
            return [v[0]] + [sum(v[(n - 1) * S + 1:min(n * S, L) + 1]) for n in range(1, N + 1)]
        l = r + 1                                    # 1-based sublayer
        n, i = (l - 1) // S + 1, (l - 1) % S + 1
        out = [v[0]] + [sum(v[(k - 1) * S + 1:k * S + 1]) for k in range(1, n)]
        if i >= 2:
            out.append(sum(v[(n - 1) * S + 1:(n - 1) * S + i]))
        return out

    alphas = []

    def read(r):
        src = sources(r)
        g, p = W[prefix(r) + "_norm.weight"], W[prefix(r) + "_proj.weight"][0]
        h, alpha = np.zeros((T, m["d"])), np.zeros((T, len(src)))
        for t in range(T):
            z = np.array([(p * g) @ (x[t] / math.sqrt(float(np.mean(x[t] ** 2)) + eps)) for x in src])
            a = np.exp(z - z.max())
            alpha[t] = a / a.sum()
            h[t] = sum(alpha[t][j] * src[j][t] for j in range(len(src)))
        alphas.append(alpha)
        return h

    for r in range(L):
        h = read(r)
        v.append(attention_loops(W, m, r // 2, h) if r % 2 == 0 else mlp(W, m, r // 2, h))
    h = read(L)
    return rmsnorm(h, W["model.norm.weight"], eps) @ lm_head(W, m).T, h, alphas


# ---------------------------------------------------------------- cases

BASE = {"hidden_size": 16, "intermediate_size": 40, "num_attention_heads": 4,
        "num_key_value_heads": 2, "vocab_size": 256, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
        "max_position_embeddings": 64}

# name: (architecture, layers, block size in layers or None, dtype, head_dim written or None,
#        tied, seed, description)
CASES = {
    "k3_llama_f32": ("llama", 3, 2, "F32", 4, False, 3101,
                     "Llama, 3 layers, attn_res_block_size 2 (blocks: layers 0-1, layer 2: the last "
                     "block is incomplete), F32, one file, untied lm_head, head_dim written"),
    "k3_llama_b1_f16": ("llama", 2, 1, "F16", None, False, 3102,
                        "Llama, 2 layers, attn_res_block_size 1 (every layer its own block), F16, "
                        "one file, untied lm_head, head_dim not written (d / H = 4)"),
    "k3_qwen3_bf16": ("qwen3", 4, 2, "BF16", 8, True, 3103,
                      "Qwen3 with q_norm/k_norm, head_dim 8 (H * head_dim = 32 != d = 16), tied "
                      "embeddings (no lm_head.weight), 4 layers, attn_res_block_size 2 (two "
                      "complete blocks), BF16, one file"),
    "llama_standard_bf16": ("llama", 2, None, "BF16", 4, False, 3105,
                            "Llama, 2 layers, attn_res_block_size null: the standard residual, no "
                            "AttnRes tensors, BF16, one file"),
}
SHARDED = ("k3_qwen3_bf16_sharded", "k3_qwen3_bf16",
           "the tensors of k3_qwen3_bf16, byte for byte, over 3 shards with "
           "model.safetensors.index.json (layer 1 split across shards 1 and 2); the same expected "
           "outputs")
FIXTURE_CASES = list(CASES) + [SHARDED[0]]
N_SHARDS = 3


def make_config(arch, layers, block, dtype, head_dim, tied):
    cfg = {"architectures": ["Qwen3ForCausalLM" if arch == "qwen3" else "LlamaForCausalLM"],
           "model_type": arch}
    cfg.update({k: BASE[k] for k in ("hidden_size", "intermediate_size")})
    cfg["num_hidden_layers"] = layers
    cfg.update({k: BASE[k] for k in ("num_attention_heads", "num_key_value_heads")})
    if head_dim is not None:
        cfg["head_dim"] = head_dim
    cfg.update({k: BASE[k] for k in ("vocab_size", "rms_norm_eps", "rope_theta")})
    cfg["tie_word_embeddings"] = tied
    cfg["torch_dtype"] = TORCH_DTYPE[dtype]
    cfg["max_position_embeddings"] = BASE["max_position_embeddings"]
    cfg["hidden_act"] = "silu"
    cfg["attention_bias"] = False
    cfg["attn_res_block_size"] = block
    return cfg


def shard_of(name, n_layers):
    """1-based shard of a tensor of the sharded case (layer order; layer 1 split)."""
    if name == "model.embed_tokens.weight":
        return 1
    if name.startswith("model.layers."):
        layer = int(name.split(".")[2])
        if layer == 0:
            return 1
        if layer == 1:
            attn_side = (".self_attn." in name or ".input_layernorm." in name
                         or ".self_attention_res_" in name)
            return 1 if attn_side else 2
        return 2 if layer < n_layers - 1 else 3
    return 3  # model.norm, the final read, lm_head


def read_stats(alpha, labels):
    n = alpha.shape[1]
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(alpha > 0, alpha * np.log(np.where(alpha > 0, alpha, 1.0)), 0.0)
    entropy = -np.sum(terms, axis=1)
    return {"n_sources": n, "sources": labels,
            "normalised_entropy": None if n == 1 else float(np.mean(entropy / math.log(n))),
            "effective_sources": float(np.mean(np.exp(entropy))),
            "top1_mass": float(np.mean(np.max(alpha, axis=1))),
            "embedding_weight": float(np.mean(alpha[:, 0])),
            "recent_weight": float(np.mean(alpha[:, -1]))}


def build_case(name):
    """{relative file name: bytes} of one case (weights, JSON) plus its expected tensors."""
    arch, layers, block, dtype, head_dim, tied, seed, description = CASES[name]
    cfg = make_config(arch, layers, block, dtype, head_dim, tied)
    W64 = make_weights(np.random.default_rng(seed), cfg)
    files = {"config.json": json_bytes(cfg),
             "model.safetensors": safetensors_bytes(W64, dtype)}
    W = checkpoint_values(parse_safetensors(files["model.safetensors"]))
    tokens = TOKENS
    expected = {}
    if block is None:
        logits, hidden = forward_standard(W, cfg, tokens)
        expected["logits"], expected["hidden_final"] = logits, hidden
        stats = None
    else:
        logits, hidden, alphas, labels = forward_k3(W, cfg, tokens)
        expected["logits"], expected["hidden_final"] = logits, hidden
        reads = []
        for r, (alpha, src) in enumerate(zip(alphas, labels)):
            expected[f"alpha.{r}"] = alpha
            kind = "final" if r == 2 * layers else ("attn" if r % 2 == 0 else "mlp")
            entry = {"read": r, "kind": kind, "layer": None if kind == "final" else r // 2}
            entry.update(read_stats(alpha, src))
            reads.append(entry)
        stats = {"reads": reads}
    case = {"tokens": tokens, "text": TEXT, "description": description, "layout": "k3",
            "dtype": dtype, "sharded": False, "block_size_layers": block,
            "block_size_sublayers": None if block is None else 2 * block,
            "weight_files": ["model.safetensors"]}
    check_case(name, cfg, W, expected, stats)
    files["case.json"] = json_bytes(case)
    return files, expected, stats, W


def build_sharded(single_files, single_expected, single_stats):
    name, source, description = SHARDED
    cfg = json.loads(single_files["config.json"])
    dtype = json.loads(single_files["case.json"])["dtype"]
    W64 = checkpoint_values(parse_safetensors(single_files["model.safetensors"]))
    n = cfg["num_hidden_layers"]
    shard_names = [f"model-{k:05d}-of-{N_SHARDS:05d}.safetensors" for k in range(1, N_SHARDS + 1)]
    groups = {k: {} for k in range(1, N_SHARDS + 1)}
    for tensor, value in W64.items():
        groups[shard_of(tensor, n)][tensor] = value
    files = {"config.json": single_files["config.json"]}
    weight_map = {}
    for k, shard in zip(range(1, N_SHARDS + 1), shard_names):
        assert groups[k], f"shard {k} is empty"
        files[shard] = safetensors_bytes(groups[k], dtype)
        for tensor in groups[k]:
            weight_map[tensor] = shard
    total = sum(len(raw) for _, _, raw in parse_safetensors(single_files["model.safetensors"]).values())
    index = {"metadata": {"total_size": total},
             "weight_map": {k: weight_map[k] for k in sorted(weight_map)}}
    files["model.safetensors.index.json"] = json_bytes(index)
    case = json.loads(single_files["case.json"])
    case.update({"description": description, "sharded": True,
                 "weight_files": ["model.safetensors.index.json"] + shard_names})
    files["case.json"] = json_bytes(case)
    # Self-check: the shards hold the single file's tensors byte for byte, and the forward pass
    # from them gives the same outputs.
    with tempfile.TemporaryDirectory() as tmp:
        for rel, data in files.items():
            with open(os.path.join(tmp, rel), "wb") as f:
                f.write(data)
        sharded = load_checkpoint(tmp)
    single = parse_safetensors(single_files["model.safetensors"])
    assert sharded == single, "sharded and single checkpoints differ"
    logits, hidden, alphas, _ = forward_k3(checkpoint_values(sharded), cfg, TOKENS)
    assert np.array_equal(logits, single_expected["logits"]), "sharded logits differ"
    assert np.array_equal(hidden, single_expected["hidden_final"]), "sharded hidden_final differs"
    for r, a in enumerate(alphas):
        assert np.array_equal(a, single_expected[f"alpha.{r}"]), f"sharded alpha.{r} differs"
    return name, files, single_expected, single_stats


def json_bytes(value):
    return (json.dumps(value, indent=2) + "\n").encode("utf-8")


def expected_bytes(expected):
    return safetensors_bytes(expected, "F64")


# ---------------------------------------------------------------- self-checks

def close(a, b, tol):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return a.shape == b.shape and bool(np.all(np.abs(a - b) <= tol * np.maximum(1.0, np.abs(b))))


def check_case(name, cfg, W, expected, stats):
    m = dims(cfg)
    T = len(TOKENS)
    assert expected["logits"].shape == (T, m["V"]) and expected["hidden_final"].shape == (T, m["d"])
    assert np.all(np.isfinite(expected["logits"]))
    k3_names = [k for k in W if "attn_res" in k or "_res_" in k]
    if m["b"] is None:
        assert not k3_names, f"{name}: AttnRes tensors in a standard checkpoint"
        plain = forward_standard_unrolled(W, cfg, TOKENS)
        assert close(expected["logits"], plain, 1e-10), f"{name}: standard != unrolled residual"
        return
    assert len(k3_names) == 4 * m["n"] + 2, f"{name}: {len(k3_names)} AttnRes tensors"
    assert ("lm_head.weight" in W) != m["tied"]
    L = 2 * m["n"]
    alphas = [expected[f"alpha.{r}"] for r in range(L + 1)]
    for r, a in enumerate(alphas):
        assert np.all(a >= 0) and np.allclose(a.sum(axis=1), 1.0, rtol=0, atol=1e-14), \
            f"{name}: alpha.{r} rows do not sum to 1"
        assert stats["reads"][r]["n_sources"] == a.shape[1]
    # Far from uniform: the reads must discriminate.
    assert max(float(np.max(a)) for a in alphas[1:]) > 0.8, f"{name}: reads are nearly uniform"
    # Block size b in layers is the lab's Block AttnRes with S = 2b sublayers.
    logits, hidden, lab_alphas = forward_lab_block(W, cfg, TOKENS)
    assert close(logits, expected["logits"], 1e-10), f"{name}: K3 != lab Block S = 2b (logits)"
    assert close(hidden, expected["hidden_final"], 1e-10)
    for r in range(L + 1):
        assert close(lab_alphas[r], alphas[r], 1e-10), f"{name}: alpha.{r} != lab Block S = 2b"
    # Source counts: layer i's attention read sees 1 + i // b completed sources plus the partial
    # sum unless layer i opens a block; its MLP read always has the partial sum; the final read
    # has 1 + ceil(n / b). (b = 1 is NOT Full AttnRes: a block is still two sublayers.)
    b = m["b"]
    counts = []
    for i in range(m["n"]):
        counts += [1 + i // b + (1 if i % b else 0), 2 + i // b]
    counts.append(1 + -(-m["n"] // b))
    assert [a.shape[1] for a in alphas] == counts, f"{name}: source counts"
    # With every proj weight zero every read is the plain mean of its sources.
    W0 = {k: (np.zeros_like(v) if k.endswith("_res_proj.weight") else v) for k, v in W.items()}
    _, _, zero_alphas, _ = forward_k3(W0, cfg, TOKENS)
    for a in zero_alphas:
        assert np.array_equal(a, np.full_like(a, 1.0 / a.shape[1])), f"{name}: zero proj != mean"


def self_checks():
    # bf16: round to nearest, ties to even, on the upper 16 bits of the float32.
    f = np.array([1.0, -2.0, 1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8, 1.0 + 2.0 ** -8 + 2.0 ** -20,
                  3.4e38, 1e-40, 0.0])
    assert list(bf16_bits(f)) == [0x3F80, 0xC000, 0x3F80, 0x3F82, 0x3F81, 0x7F80, 0x0001, 0x0000]
    assert bf16_values(bf16_bits([0.3]))[0] == np.float32(0.30078125)
    # safetensors round trip with every dtype.
    rng = np.random.default_rng(0)
    for dtype in DTYPE_SIZE:
        t = {"b": rng.normal(size=(3, 5)), "a": rng.normal(size=(7,))}
        data = safetensors_bytes(t, dtype)
        (n,) = struct.unpack("<Q", data[:8])
        assert n % 8 == 0 and json.loads(data[8:8 + n])["__metadata__"] == {"format": "pt"}
        back = checkpoint_values(parse_safetensors(data))
        for k in t:
            assert np.array_equal(back[k], stored(t[k], dtype))
            assert np.array_equal(stored(back[k], dtype), back[k])
    # A read: α rows sum to 1; zero proj gives the mean; the key is scale invariant.
    sources = [rng.normal(size=(5, 16)) * s for s in (0.5, 1.0, 3.0)]
    g, p = 1.0 + 0.2 * rng.normal(size=16), rng.normal(size=(1, 16))
    h, a = depth_read(sources, g, p, 1e-6)
    assert np.allclose(a.sum(axis=1), 1.0, rtol=0, atol=1e-15)
    h0, a0 = depth_read(sources, g, np.zeros((1, 16)), 1e-6)
    assert np.allclose(h0, sum(sources) / 3, rtol=0, atol=1e-14) and np.all(a0 == 1.0 / 3)
    _, a_scaled = depth_read([sources[0] * 7.0] + sources[1:], g, p, 0.0)
    _, a_plain = depth_read(sources, g, p, 0.0)
    assert np.allclose(a_scaled, a_plain, rtol=0, atol=1e-13)
    # The single-source read returns its source.
    h1, a1 = depth_read(sources[:1], g, p, 1e-6)
    assert np.array_equal(a1, np.ones((5, 1))) and np.allclose(h1, sources[0], rtol=0, atol=0)
    # RoPE: position 0 is the identity; rotate_half pairs j with j + hd/2.
    x = rng.normal(size=(2, 3, 8))
    assert np.allclose(rope(x, 10000.0)[:, 0], x[:, 0], rtol=0, atol=0)
    assert np.array_equal(rotate_half(np.arange(4.0)), np.array([-2.0, -3.0, 0.0, 1.0]))


# ---------------------------------------------------------------- build, write, compare

def all_cases():
    """{case: ({file: bytes}, expected tensors, stats or None)}."""
    out = {}
    for name in CASES:
        files, expected, stats, _ = build_case(name)
        out[name] = (files, expected, stats)
    name, files, expected, stats = build_sharded(*out[SHARDED[1]])
    out[name] = (files, expected, stats)
    assert list(out) == FIXTURE_CASES
    return out


def case_files(files, expected, stats):
    all_files = dict(files)
    all_files["expected.safetensors"] = expected_bytes(expected)
    if stats is not None:
        all_files["stats.json"] = json_bytes(stats)
    return all_files


def compare_values(where, a, b):
    """None when JSON values a (committed) and b (fresh) agree within TOL, else a message."""
    if isinstance(b, dict):
        if not isinstance(a, dict) or set(a) != set(b):
            return f"{where}: keys differ"
        for k in b:
            msg = compare_values(f"{where}.{k}", a[k], b[k])
            if msg:
                return msg
        return None
    if isinstance(b, list):
        if not isinstance(a, list) or len(a) != len(b):
            return f"{where}: lengths differ"
        for i, (x, y) in enumerate(zip(a, b)):
            msg = compare_values(f"{where}[{i}]", x, y)
            if msg:
                return msg
        return None
    if isinstance(b, float) and isinstance(a, (int, float)) and not isinstance(a, bool):
        return None if abs(a - b) <= TOL * max(1.0, abs(b)) else f"{where}: {a!r} != {b!r}"
    return None if a == b and type(a) == type(b) else f"{where}: {a!r} != {b!r}"


def file_difference(rel, committed, fresh):
    """None when a committed file reproduces the fresh one, else a message naming what differs."""
    if rel == "expected.safetensors":
        try:
            old = parse_safetensors(committed, rel)
        except (ValueError, KeyError, json.JSONDecodeError) as e:
            return f"unreadable: {e}"
        new = parse_safetensors(fresh, rel)
        if set(old) != set(new):
            return f"tensors differ: missing {sorted(set(new) - set(old))}, " \
                   f"extra {sorted(set(old) - set(new))}"
        for name in sorted(new):
            (dt0, sh0, raw0), (dt1, sh1, raw1) = old[name], new[name]
            if dt0 != dt1 or sh0 != sh1:
                return f"tensor {name}: {dt0} {sh0} != {dt1} {sh1}"
            a, b = decode(raw0, dt0, sh0), decode(raw1, dt1, sh1)
            if not close(a, b, TOL):
                worst = float(np.max(np.abs(a - b) / np.maximum(1.0, np.abs(b))))
                return f"tensor {name}: differs by {worst:.3e} (tolerance {TOL:g})"
        return None
    if rel == "stats.json":
        try:
            return compare_values("stats", json.loads(committed), json.loads(fresh))
        except json.JSONDecodeError as e:
            return f"unreadable: {e}"
    if committed == fresh:
        return None
    if rel.endswith(".safetensors"):
        try:
            old = parse_safetensors(committed, rel)
        except (ValueError, KeyError, json.JSONDecodeError) as e:
            return f"unreadable: {e}"
        new = parse_safetensors(fresh, rel)
        for name in sorted(set(old) | set(new)):
            if old.get(name) != new.get(name):
                return f"tensor {name} differs (weights must be bit-identical)"
        return "the bytes differ (header or layout)"
    return "the bytes differ"


def write_fixtures(out_dir, cases, force):
    for name, (files, expected, stats) in cases.items():
        case_dir = os.path.join(out_dir, name)
        os.makedirs(case_dir, exist_ok=True)
        wanted = case_files(files, expected, stats)
        for rel, data in wanted.items():
            path = os.path.join(case_dir, rel)
            if not force and os.path.exists(path):
                with open(path, "rb") as f:
                    if file_difference(rel, f.read(), data) is None:
                        continue
            with open(path, "wb") as f:
                f.write(data)
            print(f"wrote {path}")
        for rel in sorted(set(os.listdir(case_dir)) - set(wanted)):
            os.remove(os.path.join(case_dir, rel))
            print(f"removed {os.path.join(case_dir, rel)} (not a file of this case)")


def check_fixtures(fixture_dir, cases):
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        write_fixtures_quietly(tmp, cases)
        for name in cases:
            fresh_dir, old_dir = os.path.join(tmp, name), os.path.join(fixture_dir, name)
            if not os.path.isdir(old_dir):
                problems.append(f"{name}: the case folder is missing")
                continue
            fresh, old = set(os.listdir(fresh_dir)), set(os.listdir(old_dir))
            for rel in sorted(fresh - old):
                problems.append(f"{name}/{rel}: missing")
            for rel in sorted(old - fresh):
                problems.append(f"{name}/{rel}: not a file of this case")
            for rel in sorted(fresh & old):
                with open(os.path.join(old_dir, rel), "rb") as f:
                    committed = f.read()
                with open(os.path.join(fresh_dir, rel), "rb") as f:
                    msg = file_difference(rel, committed, f.read())
                if msg:
                    problems.append(f"{name}/{rel}: {msg}")
    extra = sorted(set(os.listdir(fixture_dir)) - set(cases)) if os.path.isdir(fixture_dir) else []
    for e in extra:
        problems.append(f"{e}: not a case of this script")
    return problems


def write_fixtures_quietly(out_dir, cases):
    for name, (files, expected, stats) in cases.items():
        os.makedirs(os.path.join(out_dir, name))
        for rel, data in case_files(files, expected, stats).items():
            with open(os.path.join(out_dir, name, rel), "wb") as f:
                f.write(data)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--out", metavar="DIR", help="write the fixtures into DIR")
    group.add_argument("--check", metavar="DIR", help="verify that the fixtures in DIR reproduce")
    parser.add_argument("--force", action="store_true",
                        help="with --out: rewrite files that already reproduce")
    args = parser.parse_args()
    self_checks()
    cases = all_cases()
    print(f"self-checks passed ({len(cases)} cases)")
    if args.out:
        write_fixtures(args.out, cases, args.force)
        problems = check_fixtures(args.out, cases)
        if problems:
            print("FAIL after writing:\n  " + "\n  ".join(problems))
            return 1
        print(f"OK: {args.out} holds {len(cases)} cases")
        return 0
    if not os.path.isdir(args.check):
        print(f"FAIL: {args.check} is not a folder")
        return 1
    problems = check_fixtures(args.check, cases)
    if problems:
        print(f"FAIL: {len(problems)} file(s) do not reproduce:\n  " + "\n  ".join(problems))
        return 1
    print(f"OK: the fixtures in {args.check} reproduce ({len(cases)} cases)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
