#!/usr/bin/python3
"""Checks that the PyTorch peer (attnres_peer.py) computes what attnres computes.

For each case, `ATTNRES forward --model DIR --tokens IDS --mode M [--block-size S] --dump F`
writes the logits (T x vocab) and the peer computes them in-process, both at f32 and at f64
(`--precision f64`; the peer with torch.float64).  They must agree to
max|peer - attnres| / max|attnres| <= 1e-4 at f32 and <= 1e-10 at f64 (an f64 forward pass
dumps F64 tensors, so the f64 comparison is limited only by the two implementations' rounding).

One exception, reported as "ok*" (and refused with --strict): a model can be ill-conditioned
at f32 -- with large pseudo-queries (query std 0.5 at d = 512) the depth softmaxes are so sharp
that attnres's own f32 logits, and its two f32 read schedules, differ from its f64 logits by
~1e-3 at some tokens.  Such a case passes when the f64 results agree and the peer's f32 logits
are no farther from attnres's f64 logits than 2x attnres's own f32 logits are.  Cases: small random models made with
`attnres init-model` (pseudo-query std 0.5, so the depth softmaxes are far from uniform) in
standard / Full / Block mode at T = 1 and T = 37, a grouped-query model (8 heads, 2 kv heads),
a Block model whose last block is incomplete (3 layers, L = 6, S = 4; and L = 8, S = 3), a model
with zero pseudo-queries, and, with --model, the given model (e.g. the benchmark's).

  /usr/bin/python3 bench/peers/check_peer.py build/ci/app/cli/attnres [--model DIR]

Exit status: 0 when every case agrees, 1 on a mismatch or when a run fails.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attnres_peer  # noqa: E402

TOLERANCE = 1e-4       # f32 peer vs attnres f32 (relative to the largest logit)
TOLERANCE_F64 = 1e-10  # f64 peer vs attnres --precision f64 (its --dump stores F64)

# name -> init-model arguments
MODELS = {
    "mha-L8": ["--layers", "4", "--d-model", "64", "--heads", "4", "--ffn", "160",
               "--vocab", "97", "--mode", "block", "--block-size", "4", "--seed", "3",
               "--query-std", "0.5"],
    "gqa-8h-2kv": ["--layers", "4", "--d-model", "64", "--heads", "8", "--kv-heads", "2",
                   "--ffn", "160", "--vocab", "97", "--mode", "block", "--block-size", "2",
                   "--seed", "4", "--query-std", "0.5"],
    "L6-S4": ["--layers", "3", "--d-model", "64", "--heads", "4", "--ffn", "160",
              "--vocab", "97", "--mode", "block", "--block-size", "4", "--seed", "5",
              "--query-std", "0.5"],
    "zero-query": ["--layers", "2", "--d-model", "32", "--heads", "2", "--ffn", "96",
                   "--vocab", "50", "--mode", "full", "--seed", "6"],
}

# (model, mode, block size or None, T)
CASES = []
for _T in (1, 37):
    for _mode, _S in (("standard", None), ("full", None), ("block", 4)):
        CASES.append(("mha-L8", _mode, _S, _T))
CASES += [("mha-L8", "block", 3, 37), ("mha-L8", "block", 1, 37), ("mha-L8", "block", 8, 37)]
for _mode, _S in (("standard", None), ("full", None), ("block", 2), ("block", 4)):
    CASES.append(("gqa-8h-2kv", _mode, _S, 37))
CASES.append(("gqa-8h-2kv", "block", 2, 1))
for _T in (1, 37):
    for _mode, _S in (("standard", None), ("full", None), ("block", 4)):
        CASES.append(("L6-S4", _mode, _S, _T))
CASES += [("zero-query", "full", None, 37), ("zero-query", "block", 3, 37)]


def main():
    parser = argparse.ArgumentParser(description="compare the PyTorch peer with attnres")
    parser.add_argument("attnres", help="the attnres binary, e.g. build/ci/app/cli/attnres")
    parser.add_argument("--model", help="also check this model directory (T = 37, S = 4)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    parser.add_argument("--strict", action="store_true",
                        help="require the f32 tolerance everywhere (no ok* for ill-conditioned "
                             "cases)")
    args = parser.parse_args()

    import numpy as np
    import torch

    torch.set_grad_enabled(False)
    work = tempfile.mkdtemp(prefix="attnres-peer-check-")
    failures = 0
    cases = list(CASES)
    directories = {}
    try:
        for name, init_args in MODELS.items():
            directory = os.path.join(work, name)
            subprocess.run([args.attnres, "init-model", *init_args, "--out", directory],
                           check=True, stdout=subprocess.DEVNULL)
            directories[name] = directory
        if args.model:
            directories["given"] = args.model
            cases += [("given", "standard", None, 37), ("given", "full", None, 37),
                      ("given", "block", 4, 37)]

        peers = {name: attnres_peer.PeerModel(d) for name, d in directories.items()}
        peers64 = {name: attnres_peer.PeerModel(d, torch.float64)
                   for name, d in directories.items()}

        def attnres_logits(name, ids, mode, S, precision, index):
            dump = os.path.join(work, f"case{index}-{precision}.safetensors")
            command = [args.attnres, "forward", "--model", directories[name],
                       "--tokens", " ".join(map(str, ids)), "--mode", mode,
                       "--precision", precision, "--dump", dump]
            if S is not None:
                command += ["--block-size", str(S)]
            run = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                 text=True)
            if run.returncode != 0:
                raise RuntimeError(f"{' '.join(command[1:4])} ... failed: {run.stderr.strip()}")
            return attnres_peer.read_safetensors(dump, torch.float64)["logits"].numpy()

        def relative(a, b):  # max |a - b| / max |b|
            return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-300))

        print(f"{'model':<12} {'mode':<8} {'S':>2} {'T':>3}  {'f32 rel diff':>12}  "
              f"{'f64 rel diff':>12}")
        flagged = 0
        for index, (name, mode, S, T) in enumerate(cases):
            peer = peers[name]
            ids = attnres_peer.make_tokens(index, T, peer.config["vocab"])
            label = f"{name:<12} {mode:<8} {S or '':>2} {T:>3}"
            try:
                ours32 = attnres_logits(name, ids, mode, S, "f32", index)
                ours64 = attnres_logits(name, ids, mode, S, "f64", index)
            except RuntimeError as error:
                print(f"{label}  attnres failed: {error}")
                failures += 1
                continue
            tokens = torch.tensor(ids, dtype=torch.long)
            theirs32 = peer.forward(tokens, mode, S or 0).double().numpy()
            theirs64 = peers64[name].forward(tokens, mode, S or 0).numpy()
            if theirs32.shape != ours32.shape:
                print(f"{label}  shape {theirs32.shape} != {ours32.shape}  MISMATCH")
                failures += 1
                continue
            diff32 = relative(theirs32, ours32)
            diff64 = relative(theirs64, ours64)
            finite = bool(np.isfinite(theirs32).all() and np.isfinite(theirs64).all())
            verdict = "ok"
            if not finite or diff64 > TOLERANCE_F64:
                verdict = "MISMATCH"
            elif diff32 > TOLERANCE:
                # Both f32 results far from each other: is the model ill-conditioned at f32
                # (attnres's own f32 as far from its f64 result as the peer's), or is it the peer?
                ours_error = relative(ours32, ours64)
                peer_error = relative(theirs32, ours64)
                if args.strict or peer_error > 2.0 * ours_error:
                    verdict = "MISMATCH"
                else:
                    verdict = (f"ok* (f32 vs f64: attnres {ours_error:.1e}, "
                               f"peer {peer_error:.1e})")
                    flagged += 1
            failures += verdict == "MISMATCH"
            print(f"{label}  {diff32:12.2e}  {diff64:12.2e}  {verdict}")
        if flagged:
            print(f"ok*: f32 logits differ by more than {TOLERANCE:g}, but the model is "
                  "ill-conditioned at f32 there: the peer's f32 logits are as close to the f64 "
                  "result as attnres's own f32 logits (within 2x), and f64 agrees.")
    except (subprocess.CalledProcessError, OSError, ValueError, KeyError, RuntimeError) as error:
        print(f"check_peer: {error}", file=sys.stderr)
        failures += 1
    finally:
        if args.keep:
            print(f"(kept {work})")
        else:
            shutil.rmtree(work, ignore_errors=True)

    total = len(cases)
    if failures:
        print(f"check_peer: {failures} of {total} cases FAILED (tolerance {TOLERANCE:g} relative)")
        return 1
    print(f"check_peer: all {total} cases agree within {TOLERANCE:g} relative")
    return 0


if __name__ == "__main__":
    sys.exit(main())
