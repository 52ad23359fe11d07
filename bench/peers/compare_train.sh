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
# BLAS: the 1024^3 sgemm rate of each OPENBLAS_CORETYPE, the fastest is used (and the bf16 GEMM
# rate, which goes through oneDNN, not OpenBLAS); (3) bf16: what CPU autocast runs in bf16 (one
# small step under train_peer.py --op-dtypes); (4) ATen's vector ISA (ATEN_CPU_CAPABILITY unset,
# i.e. AVX2 in PyTorch 1.13, or avx512), the faster for each precision; (5) at 2 threads, the
# OpenMP wait policy that suits the peer now; (6) for threads 1 and 2 and modes standard / full
# / block (S = 4), in f32 and bf16: `attnres bench train [--precision f32|bf16]` (when it exists;
# bf16 when its --help mentions bf16, "n/a" otherwise) and the training peer
# (bench/peers/train_peer.py --precision f32|bf16: forward + loss + backward + clip + AdamW step
# on a fixed random batch; bf16 = forward and loss under torch.autocast("cpu", bfloat16), f32
# master weights and optimizer), each the median over ATTNRES_TRAIN_RUNS runs of the median step
# time; (7) a Markdown table of tokens/s (B * T per step / seconds per step), both precisions
# side by side, and the ratios attnres bf16 / attnres f32 and attnres bf16 / PyTorch bf16.
#
# Needs /usr/bin/python3 with python3-torch (bash scripts/install-peer-deps.sh).
# Environment: ATTNRES_TRAIN_SEQ (256), ATTNRES_TRAIN_BATCH (8), ATTNRES_TRAIN_STEPS (5 timed
# steps), ATTNRES_TRAIN_WARMUP (2), ATTNRES_TRAIN_RUNS (1), ATTNRES_PEER_CORETYPE (skip the
# probe: unset | Haswell | SkylakeX | ...), ATTNRES_PEER_CPU_CAPABILITY (skip step 4: unset |
# avx2 | avx512, both precisions), ATTNRES_TRAIN_SKIP_CHECK=1 (skip step 1).
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

peer_env() {  # peer_env CORETYPE WAIT_POLICY CPU_CAPABILITY command...
  local core="$1" wait="$2" cap="$3"
  shift 3
  local settings=()
  [ "$core" != unset ] && settings+=("OPENBLAS_CORETYPE=$core")
  [ "$wait" != unset ] && settings+=("OMP_WAIT_POLICY=$wait")
  [ "$cap" != unset ] && settings+=("ATEN_CPU_CAPABILITY=$cap")
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE -u OMP_WAIT_POLICY -u ATEN_CPU_CAPABILITY \
    "${settings[@]}" "$@"
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
    if peer_env "$core" unset unset "$python" "$peer" --gemm-probe --threads 1 --format json \
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
peer_env "$best_core" unset unset "$python" "$peer" --gemm-probe --threads 1 --format json \
  >"$work/gemm.json" || die "the peer's GEMM probe failed"
best_used="$(json_field "$work/gemm.json" blas.openblas_corename)"
bf16_rate="$(json_field "$work/gemm.json" gemm_gflops_bf16)"
autocast_mm="$(json_field "$work/gemm.json" autocast_mm_dtype)"
echo "   chosen: OPENBLAS_CORETYPE=$best_core (OpenBLAS core $best_used), $best_rate GFLOP/s single-thread sgemm"
echo "   bf16: torch.mm 1024 x 1024 in bf16 $bf16_rate GFLOP/s (oneDNN, torch.backends.mkldnn" \
  "$( [ "$(json_field "$work/gemm.json" torch_settings.mkldnn_enabled)" = True ] && echo on || echo off));" \
  "torch.mm of f32 matrices under CPU autocast gives $autocast_mm"

echo
echo "== 3. bf16: what CPU autocast runs in bf16 (one step, Block S = $block_size, B = 2, T = 32)"
bf16_note=""
if peer_env "$best_core" unset unset "$python" "$peer" --model "$(model_for block)" --mode block \
    --block-size "$block_size" --seq 32 --batch 2 --warmup 1 --precision bf16 --op-dtypes \
    >"$work/ops.txt" 2>"$work/ops.err"; then
  grep -E 'matmul-class|initial loss' "$work/ops.txt" | sed 's/^ */   /'
  if grep -q 'matmul-class calls[^;]* f32' "$work/ops.txt"; then
    bf16_note="some matmuls stay f32 under autocast (train_peer.py --op-dtypes lists them)"
  fi
else
  echo "   train_peer.py --op-dtypes failed: $(head -n1 "$work/ops.err")"
fi
[ "$autocast_mm" = bfloat16 ] || bf16_note="CPU autocast does not take torch.mm to bf16 here ($autocast_mm)"
[ -z "$bf16_note" ] || echo "   note: $bf16_note"

echo
echo "== 4. ATen's vector ISA for the peer (ATEN_CPU_CAPABILITY; standard, 1 thread, B = $batch, T = $seq, 2 steps)"
# PyTorch 1.13 runs its elementwise / softmax / norm kernels with AVX2 even on AVX-512 CPUs
# (AVX-512 is opt-in there); the faster of the two is kept, for each precision.
if [ -n "${ATTNRES_PEER_CPU_CAPABILITY:-}" ]; then
  caps=("$ATTNRES_PEER_CPU_CAPABILITY")
elif grep -qw avx512f /proc/cpuinfo; then
  caps=(unset avx512)
else
  caps=(unset)
fi
declare -A best_cap=()
for precision in f32 bf16; do
  best_cap[$precision]="${caps[0]}"
  best_seconds=""
  if [ "${#caps[@]}" = 1 ]; then
    echo "   $precision ATEN_CPU_CAPABILITY=${caps[0]} (not probed)"
    continue
  fi
  for cap in "${caps[@]}"; do
    seconds=""
    if peer_env "$best_core" unset "$cap" "$python" "$peer" \
        --model "$(model_for standard)" --mode standard --seq "$seq" --batch "$batch" \
        --threads 1 --warmup 1 --steps 2 --precision "$precision" --format json \
        >"$work/cap.json" 2>"$work/cap.err"; then
      seconds="$(json_field "$work/cap.json" seconds_per_step)"
      printf '   %-4s ATEN_CPU_CAPABILITY=%-7s (%s) %8.0f tokens/s\n' "$precision" "$cap" \
        "$(json_field "$work/cap.json" torch_settings.cpu_capability)" \
        "$(json_field "$work/cap.json" tokens_per_second)"
    fi
    if [ -n "$seconds" ] && { [ -z "$best_seconds" ] || greater "$best_seconds" "$seconds"; }; then
      best_seconds="$seconds"
      best_cap[$precision]="$cap"
    fi
  done
done
echo "   chosen: f32 ATEN_CPU_CAPABILITY=${best_cap[f32]}, bf16 ATEN_CPU_CAPABILITY=${best_cap[bf16]}"

echo
echo "== 5. the peer's OpenMP wait policy at 2 threads (standard, f32, B = $batch, T = $seq, 2 steps)"
best_wait="unset"
best_tps=0
for wait in unset PASSIVE; do
  tps=0
  if peer_env "$best_core" "$wait" "${best_cap[f32]}" "$python" "$peer" --model "$(model_for standard)" \
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
# ATTNRES BENCH TRAIN. Detected by `attnres bench train --help` succeeding; its help decides the
# precision flag: `--precision f32` is passed when the help lists --precision (older binaries
# have none and train in f32), and the bf16 column is run only when the help mentions bf16
# (otherwise it reads "n/a"). It must print JSON with `tokens_per_second` (and, when it has
# one, `precision`, which is checked against the one asked for).
ours_available=0
ours_precision=0
ours_bf16=0
if train_help="$("$attnres" bench train --help 2>&1)"; then
  ours_available=1
  if grep -q -- '--precision' <<<"$train_help"; then ours_precision=1; fi
  if [ "$ours_precision" = 1 ] && grep -q 'bf16' <<<"$train_help"; then ours_bf16=1; fi
fi
run_ours() {  # run_ours MODEL MODE THREADS PRECISION OUT.json [--block-size S]
  local model="$1" mode="$2" threads="$3" precision="$4" out="$5"
  shift 5
  local flags=()
  [ "$ours_precision" = 1 ] && flags=(--precision "$precision")
  "$attnres" bench train --model "$model" --mode "$mode" "$@" --seq "$seq" --batch "$batch" \
    --steps "$steps" --warmup "$warmup" --threads "$threads" "${flags[@]}" --format json >"$out"
}
ours_runs() {  # ours_runs PRECISION: exit status 0 when attnres runs that precision
  [ "$ours_available" = 1 ] && { [ "$1" = f32 ] || [ "$ours_bf16" = 1 ]; }
}
# ---------------------------------------------------------------------------------------------

echo
echo "== 6. training steps: B = $batch, T = $seq, $warmup warm-up + $steps timed steps (median), f32 and bf16, $runs run(s) each"
if [ "$ours_available" = 0 ]; then
  echo "   attnres bench train: not available in this binary (n/a)"
elif [ "$ours_bf16" = 0 ]; then
  echo "   attnres bench train: no bf16 in its --help (attnres bf16: n/a)"
fi
results="$work/results.txt"
: >"$results"
for threads in 1 2; do
  for mode in standard full block; do
    extra=()
    [ "$mode" = block ] && extra=(--block-size "$block_size")
    model="$(model_for "$mode")"
    for run in $(seq 1 "$runs"); do
      for precision in f32 bf16; do
        ours="$work/ours-$mode-$threads-$precision-$run.json"
        theirs="$work/peer-$mode-$threads-$precision-$run.json"
        if ours_runs "$precision"; then
          run_ours "$model" "$mode" "$threads" "$precision" "$ours" "${extra[@]}" 2>"$work/ours.err" ||
            { echo "   attnres bench train ($precision) failed: $(head -n1 "$work/ours.err")"; rm -f "$ours"; }
        fi
        peer_env "$best_core" "$best_wait" "${best_cap[$precision]}" "$python" "$peer" \
          --model "$model" --mode "$mode" "${extra[@]}" --seq "$seq" --batch "$batch" \
          --steps "$steps" --warmup "$warmup" --threads "$threads" --precision "$precision" \
          --format json >"$theirs" ||
          die "the training peer failed ($mode, $threads threads, $precision)"
        echo "$mode $threads $precision $ours $theirs" >>"$results"
        printf '   %-8s %d thread(s) %-4s run %d: attnres %s, peer %.0f tokens/s (%.0f ms/step)\n' \
          "$mode" "$threads" "$precision" "$run" \
          "$( [ -f "$ours" ] && printf '%.0f tokens/s' "$(json_field "$ours" tokens_per_second)" || echo n/a)" \
          "$(json_field "$theirs" tokens_per_second)" "$(json_field "$theirs" seconds_per_step | awk '{print $1 * 1000}')"
      done
    done
  done
done

echo
echo "== 7. results"
"$python" - "$results" "$seq" "$batch" "$best_core" "$best_used" "$best_rate" "$best_wait" \
    "$model_note" "$grad_note" "${best_cap[f32]}" "${best_cap[bf16]}" "$bf16_rate" "$autocast_mm" \
    "$ours_available$ours_bf16" <<'EOF'
import json, os, statistics, sys

(results, seq, batch, core, used, rate, wait, model_note, grad_note, cap_f32, cap_bf16,
 bf16_rate, autocast_mm, ours_support) = sys.argv[1:15]
ours, peer, rss = {}, {}, {}
mismatches = set()
first = None
for line in open(results):
    mode, threads, precision, ours_path, peer_path = line.split()
    key = (mode, int(threads), precision)
    if os.path.exists(ours_path):
        o = json.load(open(ours_path))
        ours.setdefault(key, []).append(o["tokens_per_second"])
        if o.get("precision", precision) != precision:
            mismatches.add(f"{precision} asked, {o['precision']} reported")
    p = json.load(open(peer_path))
    peer.setdefault(key, []).append(p["tokens_per_second"])
    rss[key] = max(rss.get(key, 0), p["peak_resident_bytes"])
    first = first or p
ours = {k: statistics.median(v) for k, v in ours.items()}
runs = {k: len(v) for k, v in peer.items()}
peer = {k: statistics.median(v) for k, v in peer.items()}


def cell(table, key):
    return f"{table[key]:.0f}" if key in table else "n/a"


def ratio(a, ka, b, kb):
    return f"{a[ka] / b[kb]:.2f}" if ka in a and kb in b else "—"


label = {"standard": "standard", "full": "Full AttnRes", "block": "Block AttnRes (S = 4)"}
print(f"Model: {model_note}; batch {batch} x T = {seq} tokens per step; f32 and bf16.")
print("Step: forward + mean next-token cross-entropy + backward + clip (global norm 1.0) + AdamW "
      "(betas 0.9, 0.95; eps 1e-8; weight decay 0.1 on matrices).")
print(f"Peer: PyTorch {first['torch_version']} eager + autograd, OPENBLAS_CORETYPE={core} "
      f"(OpenBLAS core {used}, {float(rate):.1f} GFLOP/s single-thread sgemm), OMP_WAIT_POLICY={wait}, "
      f"ATEN_CPU_CAPABILITY={cap_f32} (f32) / {cap_bf16} (bf16).")
print(f"Peer bf16: f32 parameters, forward + loss under torch.autocast('cpu', dtype=torch.bfloat16), "
      f"backward outside, f32 clip + AdamW; mkldnn on (oneDNN bf16 GEMM {bf16_rate} GFLOP/s "
      f"single-thread; torch.mm under autocast -> {autocast_mm}).")
print(f"Gradients: {grad_note}.")
if ours_support == "00":
    print("attnres: no `bench train` in this binary (n/a).")
elif ours_support == "10":
    print("attnres bf16: n/a (`attnres bench train --help` mentions no bf16).")
for m in sorted(mismatches):
    print(f"WARNING: attnres bench train reported another precision than asked ({m}).")
print()
print("| mode | threads | attnres f32 | attnres bf16 | PyTorch f32 | PyTorch bf16 | "
      "attnres bf16 / f32 | attnres bf16 / PyTorch bf16 | attnres f32 / PyTorch f32 | "
      "PyTorch peak RSS f32 / bf16 |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for threads in (1, 2):
    for mode in ("standard", "full", "block"):
        f32, bf16 = (mode, threads, "f32"), (mode, threads, "bf16")
        print(f"| {label[mode]} | {threads} | {cell(ours, f32)} | {cell(ours, bf16)} | "
              f"{cell(peer, f32)} | {cell(peer, bf16)} | {ratio(ours, bf16, ours, f32)} | "
              f"{ratio(ours, bf16, peer, bf16)} | {ratio(ours, f32, peer, f32)} | "
              f"{rss[f32] / 2**20:.0f} / {rss[bf16] / 2**20:.0f} MiB |")
print()
print(f"tokens/s = {batch} x {seq} / median seconds per step (median over {max(runs.values())} run(s)); "
      "ratios of tokens/s (attnres bf16 / PyTorch bf16 above 1: attnres is faster).")
for precision in ("f32", "bf16"):
    parts = []
    for threads in (1, 2):
        for mode in ("full", "block"):
            parts.append(f"{mode} / standard at {threads} thread(s) "
                         f"{peer[(mode, threads, precision)] / peer[('standard', threads, precision)]:.2f}")
    print(f"Peer {precision}: " + ", ".join(parts) + "; 2 / 1 threads: " +
          ", ".join(f"{m} {peer[(m, 2, precision)] / peer[(m, 1, precision)]:.2f}"
                    for m in ("standard", "full", "block")) + ".")
print("Peer bf16 / f32: " + ", ".join(
    f"{m} {t} thread(s) {peer[(m, t, 'bf16')] / peer[(m, t, 'f32')]:.2f}"
    for t in (1, 2) for m in ("standard", "full", "block")) + ".")
EOF
echo
echo "load average now: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs (timings are noisy when the machine is shared)"
