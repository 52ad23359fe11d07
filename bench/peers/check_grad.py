#!/usr/bin/python3
"""Independent gradient check: attnres's backward pass against PyTorch autograd, both at f64.

For each case, `ATTNRES forward --model DIR --tokens IDS --mode M [--block-size S]
--precision f64 --grad --dump F.safetensors` writes `loss` (shape [1]), `grad.<name>` for every
parameter (F64 at f64) and `sublayer_output_grad_rms` (L); the PyTorch side builds the same model
in float64 with train_peer.TrainModel (written from docs/math.md, autograd only) and runs one
forward + backward of the same loss (mean next-token cross-entropy over positions 0 .. T-2).

Pass criteria, per case:
  every grad.* tensor   max|torch - attnres| / max(1e-12, max|attnres|) <= 1e-8
  the loss              |torch - attnres| / |attnres| <= 1e-10
and the two sides must name the same set of parameters. `sublayer_output_grad_rms` (d loss / d v_l,
RMS over tokens and channels; PyTorch: retain_grad on each sublayer output) is compared too and
printed, but does not decide the exit status.

Before that, the PyTorch side checks itself: autograd against central finite differences of the
f64 loss on a few elements of every kind of tensor, in every mode (--self-test: only that).

Cases: a small random model per mode, made with
  attnres init-model --layers 2 --d-model 32 --heads 4 --kv-heads 2 --ffn 48 --vocab 64
      --mode M [--block-size 2] --seed 3 --query-std 0.5 --weight-std 0.1
in standard / Full / Block (S = 2) mode, at T = 17 and T = 2 (one predicted position).

  /usr/bin/python3 bench/peers/check_grad.py build/ci/app/cli/attnres [--keep] [--brief] \
      [--engine fast --engine reference]
  /usr/bin/python3 bench/peers/check_grad.py build/ci/app/cli/attnres --self-test

Exit status: 0 when every case agrees; 1 on a mismatch or a failed run; 2 when the binary's
`forward` has no --grad flag yet (nothing compared; the finite-difference self-test still runs
and its failure gives 1).
"""

import argparse
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attnres_peer  # noqa: E402
import train_peer  # noqa: E402

TOLERANCE_GRAD = 1e-8   # relative to the largest |attnres gradient| of the tensor
TOLERANCE_LOSS = 1e-10  # relative
TOLERANCE_FD = 1e-6     # autograd vs central differences (h = 1e-5), relative + 1e-9 absolute

INIT = ["--layers", "2", "--d-model", "32", "--heads", "4", "--kv-heads", "2", "--ffn", "48",
        "--vocab", "64", "--seed", "3", "--query-std", "0.5", "--weight-std", "0.1"]
MODES = [("standard", None), ("full", None), ("block", 2)]
LENGTHS = [17, 2]


def safetensors_header(path):
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length).decode("utf-8"))
    header.pop("__metadata__", None)
    return header


def has_grad_flag(attnres):
    run = subprocess.run([attnres, "forward", "--help"], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    return "--grad" in run.stdout.replace("--grad-", "")  # the flag itself, not --grad-something


def torch_side(directory, mode, S, ids):
    """loss, {name: grad (numpy f64)}, [RMS of d loss / d v_l]: PyTorch autograd at f64."""
    import torch

    model = train_peer.TrainModel(directory, torch.float64, mode, S or 0)
    outputs = []
    loss = model.loss_and_gradients([ids], outputs)
    grads = {name: (t.grad if t.grad is not None else torch.zeros_like(t)).numpy()
             for name, t in model.params.items()}
    rms = [float(v.grad.pow(2).mean().sqrt()) for v in outputs]
    return loss, grads, rms


def self_test(directories):
    """Autograd vs central finite differences on a few elements per tensor kind and mode."""
    import torch

    probes = ["model.embed_tokens.weight", "model.layers.0.input_layernorm.weight",
              "model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.k_proj.weight",
              "model.layers.1.self_attn.v_proj.weight", "model.layers.1.self_attn.o_proj.weight",
              "model.layers.0.post_attention_layernorm.weight", "model.layers.1.mlp.gate_proj.weight",
              "model.layers.0.mlp.up_proj.weight", "model.layers.1.mlp.down_proj.weight",
              "model.layers.0.attn_res.query", "model.layers.1.mlp_res.key_norm.weight",
              "model.final_res.query", "model.final_res.key_norm.weight", "model.norm.weight",
              "lm_head.weight"]
    h = 1e-5
    worst, failures, count = 0.0, 0, 0
    generator = torch.Generator().manual_seed(11)
    for mode, S in MODES:
        model = train_peer.TrainModel(directories[mode], torch.float64, mode, S or 0)
        ids = attnres_peer.make_tokens(5, 9, model.config["vocab"])
        model.loss_and_gradients([ids])
        tokens = torch.tensor([ids], dtype=torch.long)
        for name in probes:
            t = model.params[name]
            grad = t.grad if t.grad is not None else torch.zeros_like(t)
            flat = t.detach().view(-1)  # shares storage with the parameter
            if name == "model.embed_tokens.weight":  # rows of tokens that occur
                candidates = [ids[0] * t.shape[1] + 3, ids[4] * t.shape[1] + 17]
            else:
                candidates = torch.randint(0, flat.numel(), (2,), generator=generator).tolist()
            for index in candidates:
                saved = float(flat[index])
                with torch.no_grad():
                    flat[index] = saved + h
                    plus = float(model.loss(tokens))
                    flat[index] = saved - h
                    minus = float(model.loss(tokens))
                    flat[index] = saved
                fd = (plus - minus) / (2 * h)
                ag = float(grad.view(-1)[index])
                error = abs(fd - ag) / (abs(ag) + 1e-3)
                worst = max(worst, error)
                count += 1
                if abs(fd - ag) > TOLERANCE_FD * abs(ag) + 1e-9:
                    failures += 1
                    print(f"   FD MISMATCH {mode} {name}[{index}]: autograd {ag:.12e}, "
                          f"finite difference {fd:.12e}")
    print(f"PyTorch f64 autograd vs central differences (h = {h:g}): {count} elements in "
          f"{len(MODES)} modes, worst |fd - autograd| / (|autograd| + 1e-3) = {worst:.1e}: "
          f"{'ok' if not failures else f'{failures} MISMATCHES'}")
    return failures


def main():
    parser = argparse.ArgumentParser(description="attnres gradients vs PyTorch autograd (f64)")
    parser.add_argument("attnres", nargs="?", default="build/ci/app/cli/attnres",
                        help="the attnres binary (default build/ci/app/cli/attnres)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    parser.add_argument("--brief", action="store_true",
                        help="one line per case instead of the per-tensor table")
    parser.add_argument("--engine", action="append", choices=["fast", "reference"],
                        help="attnres forward --engine (repeatable: each engine is checked; "
                             "default: the binary's default engine)")
    parser.add_argument("--self-test", action="store_true",
                        help="only the PyTorch finite-difference self-test")
    args = parser.parse_args()

    import numpy as np
    import torch

    work = tempfile.mkdtemp(prefix="attnres-grad-check-")
    failures = 0
    cases = 0
    try:
        directories = {}
        for mode, S in MODES:
            directory = os.path.join(work, mode)
            extra = ["--block-size", str(S)] if S else []
            subprocess.run([args.attnres, "init-model", *INIT, "--mode", mode, *extra,
                            "--out", directory], check=True, stdout=subprocess.DEVNULL)
            directories[mode] = directory

        failures += self_test(directories)
        if args.self_test:
            return 1 if failures else 0
        if not has_grad_flag(args.attnres):
            print(f"check_grad: `{args.attnres} forward --help` lists no --grad flag: attnres "
                  "cannot dump gradients yet; nothing compared")
            return 1 if failures else 2

        runs = [(engine, mode, S, T) for engine in (args.engine or [None])
                for mode, S in MODES for T in LENGTHS]
        for engine, mode, S, T in runs:
            cases += 1
            ids = attnres_peer.make_tokens(cases, T, 64)
            label = f"{mode}{f' S={S}' if S else ''} T={T}{f' engine {engine}' if engine else ''}"
            dump = os.path.join(work, f"{mode}-{T}-{engine}.safetensors")
            command = [args.attnres, "forward", "--model", directories[mode],
                       "--tokens", " ".join(map(str, ids)), "--mode", mode,
                       "--precision", "f64", "--grad", "--dump", dump]
            if S:
                command += ["--block-size", str(S)]
            if engine:
                command += ["--engine", engine]
            run = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                 text=True)
            if run.returncode != 0:
                print(f"== {label}: attnres failed: {run.stderr.strip()}")
                failures += 1
                continue
            header = safetensors_header(dump)
            theirs = {name: t.numpy() for name, t in
                      attnres_peer.read_safetensors(dump, torch.float64).items()}
            loss, grads, rms = torch_side(directories[mode], mode, S, ids)

            bad = 0
            rows = []
            names = sorted({n[len("grad."):] for n in theirs if n.startswith("grad.")} | set(grads))
            for name in names:
                key = "grad." + name
                if key not in theirs or name not in grads:
                    rows.append((name, "", "", "", "", f"MISSING in {'attnres' if key not in theirs else 'PyTorch'}"))
                    bad += 1
                    continue
                a, b = grads[name], theirs[key]
                if a.shape != b.shape:
                    rows.append((name, str(list(b.shape)), "", "", "",
                                 f"SHAPE {list(a.shape)} != {list(b.shape)}"))
                    bad += 1
                    continue
                scale = float(np.abs(b).max()) if b.size else 0.0
                diff = float(np.abs(a - b).max()) if b.size else 0.0
                rel = diff / max(1e-12, scale)
                verdict = "ok"
                if header[key]["dtype"] != "F64":
                    verdict = f"dtype {header[key]['dtype']} (want F64)"
                    bad += 1
                elif not math.isfinite(rel) or rel > TOLERANCE_GRAD:
                    verdict = "MISMATCH"
                    bad += 1
                rows.append((name, "x".join(map(str, b.shape)), f"{scale:.3e}", f"{diff:.2e}",
                             f"{rel:.2e}", verdict))

            their_loss = float(theirs["loss"].reshape(-1)[0]) if "loss" in theirs else float("nan")
            loss_rel = abs(loss - their_loss) / max(abs(their_loss), 1e-300)
            loss_ok = math.isfinite(loss_rel) and loss_rel <= TOLERANCE_LOSS
            bad += not loss_ok
            rms_note = "absent from the dump"
            if "sublayer_output_grad_rms" in theirs:
                b = theirs["sublayer_output_grad_rms"].reshape(-1)
                if b.shape[0] != len(rms):
                    rms_note = f"length {b.shape[0]} != L = {len(rms)} (informational)"
                else:
                    r = float(np.abs(np.array(rms) - b).max() / max(1e-300, np.abs(b).max()))
                    rms_note = (f"rel diff {r:.2e} "
                                f"{'ok' if r <= TOLERANCE_GRAD else 'DIFFERS (informational)'}")
            worst = max([float(row[4]) for row in rows if row[4]] or [0.0])
            verdict = "ok" if not bad else f"{bad} FAILED"
            print(f"== {label}: loss attnres {their_loss:.15g}, PyTorch {loss:.15g} "
                  f"(rel diff {loss_rel:.1e} {'ok' if loss_ok else 'MISMATCH'}); "
                  f"{len(rows)} gradients, worst rel diff {worst:.2e}; "
                  f"sublayer_output_grad_rms {rms_note}: {verdict}")
            if not args.brief or bad:
                print(f"   {'tensor':<48} {'shape':>7} {'max|attnres|':>12} "
                      f"{'max|diff|':>9} {'rel diff':>9}")
                for row in rows:
                    if args.brief and row[5] == "ok":
                        continue
                    print(f"   {row[0]:<48} {row[1]:>7} {row[2]:>12} {row[3]:>9} {row[4]:>9}  {row[5]}")
            failures += bool(bad)
    except (subprocess.CalledProcessError, OSError, ValueError, KeyError) as error:
        print(f"check_grad: {error}", file=sys.stderr)
        failures += 1
    finally:
        if args.keep:
            print(f"(kept {work})")
        else:
            shutil.rmtree(work, ignore_errors=True)

    if failures:
        print(f"check_grad: FAILED ({failures} failing case(s) or checks of {cases}; gradients "
              f"{TOLERANCE_GRAD:g}, loss {TOLERANCE_LOSS:g} relative)")
        return 1
    print(f"check_grad: all {cases} cases agree (gradients within {TOLERANCE_GRAD:g}, loss within "
          f"{TOLERANCE_LOSS:g} relative)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
