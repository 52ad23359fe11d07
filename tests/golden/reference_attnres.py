#!/usr/bin/python3
"""Independent NumPy implementation of SPEC §2 (standard / Full / Block AttnRes forward passes).

Written from the SPEC, not from the C++ code: per-token loops, explicit source lists, explicit
key norms and softmax, all in float64. It makes small random models, writes them as
config.json + model.safetensors (F32), and writes the expected outputs (F64) that the C++ golden
tests must match (1e-10 at f64, 1e-5 at f32).

    /usr/bin/python3 tests/golden/reference_attnres.py --out tests/golden/fixtures
    /usr/bin/python3 tests/golden/reference_attnres.py --check tests/golden/fixtures

Needs only python3-numpy (Debian).
"""
import argparse
import json
import os
import struct
import sys

import numpy as np


# ---------------------------------------------------------------- safetensors

def write_safetensors(path, tensors, dtype):
    """tensors: list of (name, ndarray). dtype 'F32' or 'F64'."""
    np_dtype = {"F32": "<f4", "F64": "<f8"}[dtype]
    header, blobs, offset = {}, [], 0
    for name, array in tensors:
        blob = np.ascontiguousarray(array, dtype=np_dtype).tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        np_dtype = {"F32": "<f4", "F64": "<f8"}[info["dtype"]]
        out[name] = np.frombuffer(data[8 + n + begin:8 + n + end], dtype=np_dtype).reshape(
            info["shape"]).astype(np.float64)
    return out


# ---------------------------------------------------------------- model

def make_model(rng, cfg, attn_res_tensors, query_std, weight_std=0.3):
    d, H, Hkv = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd, F, V = d // H, cfg["intermediate_size"], cfg["vocab_size"]

    def w(*shape, std=weight_std):
        return (rng.standard_normal(shape) * std).astype(np.float32).astype(np.float64)

    def gain():
        return (1.0 + 0.1 * rng.standard_normal(d)).astype(np.float32).astype(np.float64)

    t = {"model.embed_tokens.weight": w(V, d, std=1.0)}
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = gain()
        t[p + "self_attn.q_proj.weight"] = w(H * hd, d)
        t[p + "self_attn.k_proj.weight"] = w(Hkv * hd, d)
        t[p + "self_attn.v_proj.weight"] = w(Hkv * hd, d)
        t[p + "self_attn.o_proj.weight"] = w(d, H * hd)
        t[p + "post_attention_layernorm.weight"] = gain()
        t[p + "mlp.gate_proj.weight"] = w(F, d)
        t[p + "mlp.up_proj.weight"] = w(F, d)
        t[p + "mlp.down_proj.weight"] = w(d, F)
        if attn_res_tensors:
            for which in ("attn_res", "mlp_res"):
                t[p + which + ".query"] = w(d, std=query_std)
                t[p + which + ".key_norm.weight"] = gain()
    t["model.norm.weight"] = gain()
    t["lm_head.weight"] = w(V, d)
    if attn_res_tensors:
        t["model.final_res.query"] = w(d, std=query_std)
        t["model.final_res.key_norm.weight"] = gain()
    return t


def rmsnorm(x, g, eps):
    return g * x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)


def rotate_half(x):
    half = x.shape[-1] // 2
    return np.concatenate([-x[..., half:], x[..., :half]], axis=-1)


def attention(t, i, x, cfg):
    T, d = x.shape
    H, Hkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = d // H
    p = f"model.layers.{i}.self_attn."
    q = (x @ t[p + "q_proj.weight"].T).reshape(T, H, hd)
    k = (x @ t[p + "k_proj.weight"].T).reshape(T, Hkv, hd)
    v = (x @ t[p + "v_proj.weight"].T).reshape(T, Hkv, hd)
    inv_freq = 1.0 / (cfg["rope_theta"] ** (np.arange(0, hd, 2) / hd))
    freqs = np.outer(np.arange(T), inv_freq)
    emb = np.concatenate([freqs, freqs], axis=-1)          # (T, hd)
    cos, sin = np.cos(emb)[:, None, :], np.sin(emb)[:, None, :]
    q = q * cos + rotate_half(q) * sin
    k = k * cos + rotate_half(k) * sin
    out = np.zeros((T, H, hd))
    for h in range(H):
        kv = h // (H // Hkv)
        for s in range(T):
            scores = np.array([q[s, h] @ k[u, kv] for u in range(s + 1)]) / np.sqrt(hd)
            p_ = np.exp(scores - scores.max())
            p_ /= p_.sum()
            out[s, h] = sum(p_[u] * v[u, kv] for u in range(s + 1))
    return out.reshape(T, H * hd) @ t[p + "o_proj.weight"].T


def mlp(t, i, x):
    p = f"model.layers.{i}.mlp."
    g = x @ t[p + "gate_proj.weight"].T
    u = x @ t[p + "up_proj.weight"].T
    return (g / (1.0 + np.exp(-g)) * u) @ t[p + "down_proj.weight"].T


def sublayer(t, l, h, cfg):
    """l is 1-based; odd l = attention of layer (l-1)//2, even l = its MLP."""
    i = (l - 1) // 2
    eps = cfg["rms_norm_eps"]
    if l % 2 == 1:
        return attention(t, i, rmsnorm(h, t[f"model.layers.{i}.input_layernorm.weight"], eps), cfg)
    return mlp(t, i, rmsnorm(h, t[f"model.layers.{i}.post_attention_layernorm.weight"], eps))


def read_params(t, l, L, d):
    """Pseudo-query and key-norm gain of read l (1-based; l = L+1 is the final read)."""
    if l == L + 1:
        prefix = "model.final_res"
    else:
        prefix = f"model.layers.{(l - 1) // 2}." + ("attn_res" if l % 2 == 1 else "mlp_res")
    if prefix + ".query" not in t:
        return np.zeros(d), np.ones(d)
    return t[prefix + ".query"], t[prefix + ".key_norm.weight"]


def depth_read(sources, w, g, eps):
    """sources: list of (T, d). Per token: keys = KeyNorm(v_i), z = w . k, softmax, sum."""
    T = sources[0].shape[0]
    h = np.zeros_like(sources[0])
    alpha = np.zeros((T, len(sources)))
    for s in range(T):
        z = np.array([w @ (g * v[s] / np.sqrt(np.mean(v[s] ** 2) + eps)) for v in sources])
        e = np.exp(z - z.max())
        a = e / e.sum()
        alpha[s] = a
        h[s] = sum(a[i] * sources[i][s] for i in range(len(sources)))
    return h, alpha


def forward(t, cfg, tokens, mode, S=None, zero_placeholder=False):
    L = 2 * cfg["num_hidden_layers"]
    d = cfg["hidden_size"]
    eps = cfg["attn_res"]["key_norm_eps"] if "attn_res" in cfg else 1e-6
    v = [t["model.embed_tokens.weight"][tokens]]           # v_0 = embedding
    alphas, in_rms, out_rms = [], [], []
    rms = lambda x: float(np.sqrt(np.mean(x * x)))
    h = v[0].copy()
    for l in range(1, L + 2):
        if mode == "standard":
            h = v[0] + sum(v[1:]) if l > 1 else v[0]
        else:
            if mode == "full":
                sources = v[:l]                            # v_0 .. v_{l-1}
            else:
                n = (l - 1) // S + 1 if l <= L else None   # block of sublayer l
                def block_sum(m):                          # b_m, m >= 1
                    return sum(v[(m - 1) * S + 1: min(m * S, L) + 1])
                if l == L + 1:
                    N = -(-L // S)
                    sources = [v[0]] + [block_sum(m) for m in range(1, N + 1)]
                else:
                    i = l - (n - 1) * S                    # position inside the block
                    sources = [v[0]] + [block_sum(m) for m in range(1, n)]
                    if i >= 2:
                        sources.append(sum(v[(n - 1) * S + 1: l]))
                    elif zero_placeholder:
                        sources.append(np.zeros_like(v[0]))
            w, g = read_params(t, l, L, d)
            h, a = depth_read(sources, w, g, eps)
            alphas.append(a)
        if l == L + 1:
            break
        in_rms.append(rms(h))
        out = sublayer(t, l, h, cfg)
        out_rms.append(rms(out))
        v.append(out)
    if mode == "standard":
        h = sum(v)
    logits = rmsnorm(h, t["model.norm.weight"], cfg["rms_norm_eps"]) @ t["lm_head.weight"].T
    return h, logits, alphas, np.array(in_rms), np.array(out_rms)


# ---------------------------------------------------------------- fixtures

CASES = [
    # name, transformer layers, mode, block size, AttnRes tensors, zero placeholder
    ("standard", 2, "standard", 0, False, False),
    ("full", 2, "full", 0, True, False),
    ("block_incomplete", 3, "block", 4, True, False),   # L = 6, S = 4: blocks of 4 and 2
    ("block_zero_placeholder", 2, "block", 2, True, True),
]
TOKENS = [3, 17, 0, 29, 8]


def build_case(name, layers, mode, S, has_attn_res, zero_placeholder, seed):
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
           "hidden_size": 16, "num_hidden_layers": layers, "num_attention_heads": 4,
           "num_key_value_heads": 2, "intermediate_size": 24, "vocab_size": 32,
           "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "hidden_act": "silu",
           "tie_word_embeddings": False}
    if has_attn_res:
        cfg["attn_res"] = {"mode": mode, "key_norm_eps": 1e-6}
        if S:
            cfg["attn_res"]["block_size"] = S
    rng = np.random.default_rng(seed)
    t = make_model(rng, cfg, has_attn_res, query_std=0.8)
    h, logits, alphas, in_rms, out_rms = forward(t, cfg, TOKENS, mode, S, zero_placeholder)
    expected = [("logits", logits), ("hidden_final", h),
                ("sublayer_input_rms", in_rms), ("sublayer_output_rms", out_rms)]
    expected += [(f"alpha.{r}", a) for r, a in enumerate(alphas)]
    meta = {"tokens": TOKENS, "mode": mode, "block_size": S, "zero_placeholder": zero_placeholder}
    return cfg, t, expected, meta


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--out", help="write fixtures into this directory")
    group.add_argument("--check", help="recompute and compare with the fixtures in this directory")
    args = parser.parse_args()
    worst = 0.0
    for seed, (name, layers, mode, S, has_attn_res, zp) in enumerate(CASES, start=1):
        cfg, t, expected, meta = build_case(name, layers, mode, S, has_attn_res, zp, seed)
        if args.out:
            case_dir = os.path.join(args.out, name)
            os.makedirs(case_dir, exist_ok=True)
            with open(os.path.join(case_dir, "config.json"), "w") as f:
                json.dump(cfg, f, indent=2)
                f.write("\n")
            write_safetensors(os.path.join(case_dir, "model.safetensors"), list(t.items()), "F32")
            write_safetensors(os.path.join(case_dir, "expected.safetensors"), expected, "F64")
            with open(os.path.join(case_dir, "case.json"), "w") as f:
                json.dump(meta, f, indent=2)
                f.write("\n")
            print(f"wrote {case_dir}")
        else:
            case_dir = os.path.join(args.check, name)
            model = read_safetensors(os.path.join(case_dir, "model.safetensors"))
            stored = read_safetensors(os.path.join(case_dir, "expected.safetensors"))
            for key, value in t.items():
                worst = max(worst, float(np.max(np.abs(model[key] - value))))
            for key, value in expected:
                diff = float(np.max(np.abs(stored[key] - value)))
                worst = max(worst, diff)
            print(f"{name}: recomputed, max difference so far {worst:.3e}")
    if args.check:
        if worst > 1e-12:
            print(f"FAIL: fixtures differ from a fresh computation by {worst:.3e}")
            return 1
        print(f"OK: fixtures reproduce (max difference {worst:.3e})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
