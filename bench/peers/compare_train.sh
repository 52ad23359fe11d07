#!/usr/bin/env bash
# attnres training against its PyTorch eager training peer, side by side.
#
#   bash bench/peers/compare_train.sh [ATTNRES_BINARY] [MODEL_DIR]
#
# Builds nothing. ATTNRES_BINARY defaults to build/ci/app/cli/attnres. Without MODEL_DIR, one
# model per mode is made (once) in ${TMPDIR:-/tmp}/attnres-train-model-{standard,full,block} with
#   attnres init-model --layers 8 --d-model 256 --heads 4 --ffn 688 --vocab 256 \
#       --mode M [--block-size 4] --seed 1 --query-std 0.5
# With MODEL_DIR, that model is run in every mode (--mode / --block-size override its config).
#
# Steps: (1) bench/peers/check_grad.py: attnres's f64 gradients against PyTorch autograd (aborts
# on a mismatch; when attnres has no `forward --grad` yet, says so and goes on); (2) the peer's
# BLAS: the 1024^3 sgemm rate of each OPENBLAS_CORETYPE, the fastest is used; (3) at 2 threads,
# the OpenMP wait policy that suits the peer now; (4) for threads 1 and 2 and modes standard /
# full / block (S = 4): `attnres bench train` (when it exists) and the training peer
# (bench/peers/train_peer.py: forward + loss + backward + clip + AdamW step on a fixed random
# batch), each the median over ATTNRES_TRAIN_RUNS runs of the median step time; (5) a Markdown
# table of tokens/s (B * T per step / seconds per step).
#
# Needs /usr/bin/python3 with python3-torch (bash scripts/install-peer-deps.sh).
# Environment: ATTNRES_TRAIN_SEQ (256), ATTNRES_TRAIN_BATCH (8), ATTNRES_TRAIN_STEPS (5 timed
# steps), ATTNRES_TRAIN_WARMUP (2), ATTNRES_TRAIN_RUNS (1), ATTNRES_PEER_CORETYPE (skip the
# probe: unset | Haswell | SkylakeX | ...), ATTNRES_TRAIN_SKIP_CHECK=1 (skip step 1).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
attnres="${1:-$root/build/ci/app/cli/attnres}"
given_model="${2:-}"
seq="${ATTNRES_TRAIN_SEQ:-256}"
batch="${ATTNRES_TRAIN_BATCH:-8}"
steps="${ATTNRES_TRAIN_STEPS:-5}"
warmup="${ATTNRES_TRAIN_WARMUP:-2}"
runs="${ATTNRES_TRAIN_RUNS:-1}"
block_size=4
python=/usr/bin/python3  # Debian's python: python3 on PATH may be another one without torch
peer="$here/train_peer.py"

die() { echo "compare_train: $*" >&2; exit 1; }

[ -x "$attnres" ] || die "no attnres binary at '$attnres' (build it, or pass its path)"
"$python" -c "import torch, numpy" 2>/dev/null ||
  die "$python cannot import torch and numpy; run: sudo bash scripts/install-peer-deps.sh"

work="$(mktemp -d "${TMPDIR:-/tmp}/attnres-compare-train.XXXXXX")"
trap 'rm -rf "$work"' EXIT

model_for() {  # model_for MODE -> the model directory to run MODE on
  if [ -n "$given_model" ]; then echo "$given_model"; else echo "${TMPDIR:-/tmp}/attnres-train-model-$1"; fi
}
if [ -n "$given_model" ]; then
  [ -f "$given_model/config.json" ] && [ -f "$given_model/model.safetensors" ] ||
    die "no model (config.json + model.safetensors) in '$given_model'"
  model_note="the model in $given_model"
else
  for mode in standard full block; do
    dir="$(model_for "$mode")"
    if [ ! -f "$dir/config.json" ] || [ ! -f "$dir/model.safetensors" ]; then
      extra=()
      [ "$mode" = block ] && extra=(--block-size "$block_size")
      echo "== creating the $mode model in $dir"
      "$attnres" init-model --layers 8 --d-model 256 --heads 4 --ffn 688 --vocab 256 \
        --mode "$mode" "${extra[@]}" --seed 1 --query-std 0.5 --out "$dir" >/dev/null
    fi
  done
  model_note="d = 256, 8 layers (L = 16), 4 heads, ffn 688, vocab 256 (one init-model file per mode)"
fi

cpu="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
echo "== machine: $cpu, $(nproc) CPUs available, load average $(cut -d' ' -f1-3 /proc/loadavg)"

peer_env() {  # peer_env CORETYPE WAIT_POLICY -- command...
  local core="$1" wait="$2"
  shift 2
  local settings=()
  [ "$core" != unset ] && settings+=("OPENBLAS_CORETYPE=$core")
  [ "$wait" != unset ] && settings+=("OMP_WAIT_POLICY=$wait")
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE -u OMP_WAIT_POLICY "${settings[@]}" "$@"
}
greater() { "$python" -c 'import sys; sys.exit(0 if float(sys.argv[1]) > float(sys.argv[2]) else 1)' "$1" "$2"; }
json_field() {  # json_field FILE KEY (dotted for nested keys)
  "$python" -c 'import json, sys
value = json.load(open(sys.argv[1]))
for key in sys.argv[2].split("."):
    value = value.get(key) if isinstance(value, dict) else None
print("" if value is None else value)' "$1" "$2"
}

echo
echo "== 1. gradients: attnres forward --grad (f64) against PyTorch autograd (f64)"
grad_note="not run (ATTNRES_TRAIN_SKIP_CHECK=1)"
if [ "${ATTNRES_TRAIN_SKIP_CHECK:-0}" != 1 ]; then
  set +e
  "$python" "$here/check_grad.py" "$attnres" --brief
  rc=$?
  set -e
  case "$rc" in
    0) grad_note="agree (check_grad.py)" ;;
    2) grad_note="not compared: attnres forward has no --grad yet" ;;
    *) die "attnres's gradients disagree with PyTorch autograd (or the check failed); not comparing speeds" ;;
  esac
fi

echo
echo "== 2. the peer's BLAS (torch.mm 1024 x 1024 f32, 1 thread, best of 2 runs x 5)"
libblas="$(readlink -f /etc/alternatives/libblas.so.3-x86_64-linux-gnu 2>/dev/null || echo '?')"
echo "   torch links libblas.so.3 -> $libblas"
if [ -n "${ATTNRES_PEER_CORETYPE:-}" ]; then
  cores=("$ATTNRES_PEER_CORETYPE")
else
  cores=(unset Haswell SkylakeX)
fi
best_core="${cores[0]}"
best_rate=0
for core in "${cores[@]}"; do
  rate=0
  used="?"
  for _ in 1 2; do
    if peer_env "$core" unset "$python" "$peer" --gemm-probe --threads 1 --format json \
        >"$work/gemm.json" 2>"$work/gemm.err"; then
      r="$(json_field "$work/gemm.json" gemm_gflops)"
      used="$(json_field "$work/gemm.json" blas.openblas_corename)"
      if greater "$r" "$rate"; then rate="$r"; fi
    fi
  done
  printf '   OPENBLAS_CORETYPE=%-10s OpenBLAS core %-11s %7.1f GFLOP/s\n' "$core" "$used" "$rate"
  if greater "$rate" "$best_rate"; then
    best_rate="$rate"
    best_core="$core"
  fi
done
peer_env "$best_core" unset "$python" "$peer" --gemm-probe --threads 1 --format json >"$work/gemm.json"
best_used="$(json_field "$work/gemm.json" blas.openblas_corename)"
echo "   chosen: OPENBLAS_CORETYPE=$best_core (OpenBLAS core $best_used), $best_rate GFLOP/s single-thread sgemm"

echo
echo "== 3. the peer's OpenMP wait policy at 2 threads (standard, B = $batch, T = $seq, 2 steps)"
best_wait="unset"
best_tps=0
for wait in unset PASSIVE; do
  tps=0
  if peer_env "$best_core" "$wait" "$python" "$peer" --model "$(model_for standard)" \
      --mode standard --seq "$seq" --batch "$batch" --threads 2 --warmup 1 --steps 2 \
      --format json >"$work/wait.json" 2>"$work/wait.err"; then
    tps="$(json_field "$work/wait.json" tokens_per_second)"
  fi
  printf '   OMP_WAIT_POLICY=%-8s %8.0f tokens/s\n' "$wait" "$tps"
  if greater "$tps" "$best_tps"; then
    best_tps="$tps"
    best_wait="$wait"
  fi
done
echo "   chosen: OMP_WAIT_POLICY=$best_wait"

# ---------------------------------------------------------------------------------------------
# ATTNRES BENCH TRAIN -- placeholder until `attnres bench train` lands. It is detected by
# `attnres bench train --help` succeeding; the command line below is the expected interface
# (mirroring `bench forward` and the peer's flags) and must print JSON with `tokens_per_second`.
# Adjust the flags here when the subcommand exists. Until then the column reads "n/a".
ours_available=0
if "$attnres" bench train --help >/dev/null 2>&1; then ours_available=1; fi
run_ours() {  # run_ours MODEL MODE THREADS OUT.json [--block-size S]
  local model="$1" mode="$2" threads="$3" out="$4"
  shift 4
  "$attnres" bench train --model "$model" --mode "$mode" "$@" --seq "$seq" --batch "$batch" \
    --steps "$steps" --warmup "$warmup" --threads "$threads" --format json >"$out"
}
# ---------------------------------------------------------------------------------------------

echo
echo "== 4. training steps: B = $batch, T = $seq, $warmup warm-up + $steps timed steps (median), f32, $runs run(s) each"
[ "$ours_available" = 1 ] || echo "   attnres bench train: not available in this binary (n/a)"
results="$work/results.txt"
: >"$results"
for threads in 1 2; do
  for mode in standard full block; do
    extra=()
    [ "$mode" = block ] && extra=(--block-size "$block_size")
    model="$(model_for "$mode")"
    for run in $(seq 1 "$runs"); do
      ours="$work/ours-$mode-$threads-$run.json"
      theirs="$work/peer-$mode-$threads-$run.json"
      if [ "$ours_available" = 1 ]; then
        run_ours "$model" "$mode" "$threads" "$ours" "${extra[@]}" 2>"$work/ours.err" ||
          { echo "   attnres bench train failed: $(head -n1 "$work/ours.err")"; rm -f "$ours"; }
      fi
      peer_env "$best_core" "$best_wait" "$python" "$peer" --model "$model" --mode "$mode" \
        "${extra[@]}" --seq "$seq" --batch "$batch" --steps "$steps" --warmup "$warmup" \
        --threads "$threads" --format json >"$theirs" ||
        die "the training peer failed ($mode, $threads threads)"
      echo "$mode $threads $ours $theirs" >>"$results"
      printf '   %-8s %d thread(s) run %d: attnres %s, peer %.0f tokens/s (%.0f ms/step)\n' \
        "$mode" "$threads" "$run" \
        "$( [ -f "$ours" ] && printf '%.0f tokens/s' "$(json_field "$ours" tokens_per_second)" || echo n/a)" \
        "$(json_field "$theirs" tokens_per_second)" "$(json_field "$theirs" seconds_per_step | awk '{print $1 * 1000}')"
    done
  done
done

echo
echo "== 5. results"
"$python" - "$results" "$seq" "$batch" "$best_core" "$best_used" "$best_rate" "$best_wait" \
    "$model_note" "$grad_note" <<'EOF'
import json, os, statistics, sys

results, seq, batch, core, used, rate, wait, model_note, grad_note = sys.argv[1:10]
ours, peer, rss = {}, {}, {}
first = None
for line in open(results):
    mode, threads, ours_path, peer_path = line.split()
    key = (mode, int(threads))
    if os.path.exists(ours_path):
        ours.setdefault(key, []).append(json.load(open(ours_path))["tokens_per_second"])
    p = json.load(open(peer_path))
    peer.setdefault(key, []).append(p["tokens_per_second"])
    rss[key] = max(rss.get(key, 0), p["peak_resident_bytes"])
    first = first or p
ours = {k: statistics.median(v) for k, v in ours.items()}
runs = {k: len(v) for k, v in peer.items()}
peer = {k: statistics.median(v) for k, v in peer.items()}

label = {"standard": "standard", "full": "Full AttnRes", "block": "Block AttnRes (S = 4)"}
print(f"Model: {model_note}; batch {batch} x T = {seq} tokens per step; f32.")
print("Step: forward + mean next-token cross-entropy + backward + clip (global norm 1.0) + AdamW "
      "(betas 0.9, 0.95; eps 1e-8; weight decay 0.1 on matrices).")
print(f"Peer: PyTorch {first['torch_version']} eager + autograd, OPENBLAS_CORETYPE={core} "
      f"(OpenBLAS core {used}, {float(rate):.1f} GFLOP/s single-thread sgemm), OMP_WAIT_POLICY={wait}.")
print(f"Gradients: {grad_note}.")
print()
print("| mode | threads | attnres tokens/s | PyTorch tokens/s | ratio | PyTorch peak RSS |")
print("|---|---:|---:|---:|---:|---:|")
for threads in (1, 2):
    for mode in ("standard", "full", "block"):
        key = (mode, threads)
        mib = f"{rss[key] / 2**20:.0f} MiB"
        if key in ours:
            print(f"| {label[mode]} | {threads} | {ours[key]:.0f} | {peer[key]:.0f} | "
                  f"{ours[key] / peer[key]:.2f} | {mib} |")
        else:
            print(f"| {label[mode]} | {threads} | n/a | {peer[key]:.0f} | — | {mib} |")
print()
print(f"tokens/s = {batch} x {seq} / median seconds per step (median over {max(runs.values())} run(s)); "
      "ratio = attnres / PyTorch (above 1: attnres is faster).")
parts = []
for threads in (1, 2):
    for mode in ("full", "block"):
        parts.append(f"{mode} / standard at {threads} thread(s) {peer[(mode, threads)] / peer[('standard', threads)]:.2f}")
print("Peer: " + ", ".join(parts) + "; 2 / 1 threads: " +
      ", ".join(f"{m} {peer[(m, 2)] / peer[(m, 1)]:.2f}" for m in ("standard", "full", "block")) + ".")
EOF
echo
echo "load average now: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs (timings are noisy when the machine is shared)"
