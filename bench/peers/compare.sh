#!/usr/bin/env bash
# attnres against its PyTorch eager peer, side by side (issue 10, item 4).
#
#   bash bench/peers/compare.sh [ATTNRES_BINARY] [MODEL_DIR]
#
# ATTNRES_BINARY defaults to build/ci/app/cli/attnres. MODEL_DIR defaults to
# ${TMPDIR:-/tmp}/attnres-peer-model; when it holds no model, it is created with
#   attnres init-model --layers 8 --d-model 512 --heads 8 --ffn 1376 --vocab 1024 \
#       --mode block --block-size 4 --seed 1 --query-std 0.5
#
# Steps: (1) bench/peers/check_peer.py: the peer must compute what attnres computes (aborts
# otherwise); (2) the peer's BLAS: the 1024^3 sgemm rate of each OPENBLAS_CORETYPE, the fastest
# is used (Debian's OpenBLAS 0.3.21 does not know recent Xeons and falls back to a generic
# Prescott kernel), and the bf16 GEMM rate (oneDNN, not OpenBLAS); (3) bf16: what CPU autocast
# runs in bf16 (one forward pass under attnres_peer.py --op-dtypes); (4) ATen's vector ISA
# (ATEN_CPU_CAPABILITY unset, i.e. AVX2 in PyTorch 1.13, or avx512), the faster for each
# precision; (5) at 2 threads, the OpenMP wait policy that suits the peer on this machine now
# (spinning threads collapse when the cores are shared with other work); (6) for threads 1 and
# 2 and modes standard / full / block (S = 4), in f32 and bf16: `attnres bench forward ...
# --precision f32|bf16 --format json` (bf16 when its --help mentions bf16, "n/a" otherwise) and
# the peer with the same settings (bf16: the f32 model under torch.autocast("cpu", bfloat16));
# (7) a Markdown table of both precisions side by side and ratios.
#
# Needs /usr/bin/python3 with python3-torch (bash scripts/install-peer-deps.sh).
# Environment: ATTNRES_PEER_SEQ (default 256), ATTNRES_PEER_REPEAT (default 5),
# ATTNRES_PEER_CPU_CAPABILITY (skip step 4: unset | avx2 | avx512, both precisions).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
attnres="${1:-$root/build/ci/app/cli/attnres}"
model="${2:-${TMPDIR:-/tmp}/attnres-peer-model}"
seq="${ATTNRES_PEER_SEQ:-256}"
repeat="${ATTNRES_PEER_REPEAT:-5}"
block_size=4
python=/usr/bin/python3  # Debian's python: python3 on PATH may be another one without torch
peer="$here/attnres_peer.py"

die() { echo "compare: $*" >&2; exit 1; }

[ -x "$attnres" ] || die "no attnres binary at '$attnres' (build it, or pass its path)"
"$python" -c "import torch, numpy" 2>/dev/null ||
  die "$python cannot import torch and numpy; run: sudo bash scripts/install-peer-deps.sh"

work="$(mktemp -d "${TMPDIR:-/tmp}/attnres-compare.XXXXXX")"
trap 'rm -rf "$work"' EXIT

if [ ! -f "$model/config.json" ] || [ ! -f "$model/model.safetensors" ]; then
  echo "== creating the model in $model"
  "$attnres" init-model --layers 8 --d-model 512 --heads 8 --ffn 1376 --vocab 1024 \
    --mode block --block-size 4 --seed 1 --query-std 0.5 --out "$model"
fi

cpu="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
echo "== machine: $cpu, $(nproc) CPUs available, load average $(cut -d' ' -f1-3 /proc/loadavg)"

echo
echo "== 1. does the peer compute what attnres computes?"
"$python" "$here/check_peer.py" "$attnres" --model "$model" ||
  die "the PyTorch peer disagrees with attnres; not comparing speeds"

# The peer's environment: OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE / OMP_WAIT_POLICY as chosen here.
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
echo "== 2. the peer's BLAS (torch.mm 1024 x 1024 f32, 1 thread, best of 2 runs x 5)"
libblas="$(readlink -f /etc/alternatives/libblas.so.3-x86_64-linux-gnu 2>/dev/null || echo '?')"
echo "   torch links libblas.so.3 -> $libblas"
best_core="unset"
best_rate=0
for core in unset Haswell SkylakeX Cooperlake SapphireRapids; do
  rate=0
  used="?"
  for _ in 1 2; do
    if peer_env "$core" unset unset "$python" "$peer" --gemm-probe --threads 1 --format json \
        >"$work/gemm.json" 2>"$work/gemm.err"; then
      r="$(json_field "$work/gemm.json" gemm_gflops)"
      used="$(json_field "$work/gemm.json" blas.openblas_corename)"
      if greater "$r" "$rate"; then
        rate="$r"
      fi
    fi
  done
  printf '   OPENBLAS_CORETYPE=%-15s OpenBLAS core %-11s %7.1f GFLOP/s\n' "$core" "$used" "$rate"
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
echo "   $(json_field "$work/gemm.json" blas.openblas_config)"
echo "   bf16: torch.mm 1024 x 1024 in bf16 $bf16_rate GFLOP/s (oneDNN, torch.backends.mkldnn" \
  "$( [ "$(json_field "$work/gemm.json" torch_settings.mkldnn_enabled)" = True ] && echo on || echo off));" \
  "torch.mm of f32 matrices under CPU autocast gives $autocast_mm"

echo
echo "== 3. bf16: what CPU autocast runs in bf16 (one forward pass, Block S = $block_size, T = 32)"
bf16_note=""
if peer_env "$best_core" unset unset "$python" "$peer" --model "$model" --mode block \
    --block-size "$block_size" --seq 32 --precision bf16 --op-dtypes \
    >"$work/ops.txt" 2>"$work/ops.err"; then
  grep -E 'matmul-class|max \|logits' "$work/ops.txt" | sed 's/^ */   /'
  echo "   (a far-off bf16 logit is this model's conditioning, not a bug: its sharp depth softmaxes" \
    "amplify rounding, f32's too -- see check_peer.py's ok* cases; standard mode is ~1e-2 off)"
  if grep -q 'matmul-class calls[^;]* f32' "$work/ops.txt"; then
    bf16_note="some matmuls stay f32 under autocast (attnres_peer.py --op-dtypes lists them)"
  fi
else
  echo "   attnres_peer.py --op-dtypes failed: $(head -n1 "$work/ops.err")"
fi
[ "$autocast_mm" = bfloat16 ] || bf16_note="CPU autocast does not take torch.mm to bf16 here ($autocast_mm)"
[ -z "$bf16_note" ] || echo "   note: $bf16_note"

echo
echo "== 4. ATen's vector ISA for the peer (ATEN_CPU_CAPABILITY; standard, 1 thread, T = $seq, median of 2)"
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
    if peer_env "$best_core" unset "$cap" "$python" "$peer" --model "$model" --seq "$seq" \
        --mode standard --threads 1 --repeat 2 --precision "$precision" --format json \
        >"$work/cap.json" 2>"$work/cap.err"; then
      seconds="$(json_field "$work/cap.json" seconds_per_forward)"
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
echo "== 5. the peer's OpenMP wait policy at 2 threads (standard, f32, T = $seq, median of 2)"
best_wait="unset"
best_tps=0
for wait in unset PASSIVE; do
  tps=0
  if peer_env "$best_core" "$wait" "${best_cap[f32]}" "$python" "$peer" --model "$model" --seq "$seq" --mode standard \
      --threads 2 --repeat 2 --format json >"$work/wait.json" 2>"$work/wait.err"; then
    tps="$(json_field "$work/wait.json" tokens_per_second)"
  fi
  printf '   OMP_WAIT_POLICY=%-8s %8.0f tokens/s\n' "$wait" "$tps"
  if greater "$tps" "$best_tps"; then
    best_tps="$tps"
    best_wait="$wait"
  fi
done
echo "   chosen: OMP_WAIT_POLICY=$best_wait"

# `attnres bench forward`: `--precision f32` is passed when its --help lists --precision, and the
# bf16 column is run only when the help mentions bf16 (otherwise it reads "n/a").
ours_available=1
ours_precision=0
ours_bf16=0
if forward_help="$("$attnres" bench forward --help 2>&1)"; then
  if grep -q -- '--precision' <<<"$forward_help"; then ours_precision=1; fi
  if [ "$ours_precision" = 1 ] && grep -q 'bf16' <<<"$forward_help"; then ours_bf16=1; fi
fi

echo
echo "== 6. forward passes: T = $seq, repeat $repeat (median), f32 and bf16"
[ "$ours_bf16" = 1 ] || echo "   attnres bench forward: no bf16 in its --help (attnres bf16: n/a)"
ours_note=""
results="$work/results.txt"
: >"$results"
for threads in 1 2; do
  for mode in standard full block; do
    extra=()
    [ "$mode" = block ] && extra=(--block-size "$block_size")
    for precision in f32 bf16; do
      ours="$work/ours-$mode-$threads-$precision.json"
      theirs="$work/peer-$mode-$threads-$precision.json"
      flags=()
      [ "$ours_precision" = 1 ] && flags=(--precision "$precision")
      if [ "$ours_available" = 1 ] && { [ "$precision" = f32 ] || [ "$ours_bf16" = 1 ]; }; then
        tps=""
        if "$attnres" bench forward --model "$model" --seq "$seq" --repeat "$repeat" \
            --threads "$threads" --mode "$mode" "${extra[@]}" "${flags[@]}" --format json \
            >"$ours" 2>"$work/ours.err"; then
          tps="$(json_field "$ours" tokens_per_second 2>/dev/null || true)"
        fi
        if [ -z "$tps" ]; then
          ours_note="$(head -n1 "$work/ours.err")"
          [ -n "$ours_note" ] || ours_note="no tokens_per_second in its output"
          rm -f "$ours"
          if grep -q "unknown command" "$work/ours.err"; then ours_available=0; fi
        fi
      fi
      peer_env "$best_core" "$best_wait" "${best_cap[$precision]}" "$python" "$peer" \
        --model "$model" --seq "$seq" --mode "$mode" "${extra[@]}" --threads "$threads" \
        --repeat "$repeat" --tokens-seed 0 --precision "$precision" --format json >"$theirs" ||
        die "the peer failed ($mode, $threads threads, $precision)"
      echo "$mode $threads $precision $ours $theirs" >>"$results"
      printf '   %-8s %d thread(s) %-4s: attnres %s, peer %.0f tokens/s\n' "$mode" "$threads" \
        "$precision" \
        "$( [ -f "$ours" ] && printf '%.0f tokens/s' "$(json_field "$ours" tokens_per_second)" || echo n/a)" \
        "$(json_field "$theirs" tokens_per_second)"
    done
  done
done

echo
echo "== 7. results"
"$python" - "$results" "$seq" "$best_core" "$best_used" "$best_rate" "$best_wait" "$ours_note" \
    "${best_cap[f32]}" "${best_cap[bf16]}" "$bf16_rate" "$autocast_mm" "$ours_available$ours_bf16" <<'EOF'
import json, os, sys

(results, seq, core, used, rate, wait, ours_note, cap_f32, cap_bf16, bf16_rate, autocast_mm,
 ours_support) = sys.argv[1:13]
ours, peer = {}, {}
mismatches = set()
first_peer = None
for line in open(results):
    mode, threads, precision, ours_path, peer_path = line.split()
    key = (mode, int(threads), precision)
    if os.path.exists(ours_path):
        ours_json = json.load(open(ours_path))
        ours[key] = ours_json["tokens_per_second"]
        if ours_json.get("precision", precision) != precision:
            mismatches.add(f"{precision} asked, {ours_json['precision']} reported")
    peer_json = json.load(open(peer_path))
    peer[key] = peer_json["tokens_per_second"]
    first_peer = first_peer or peer_json


def cell(table, key):
    return f"{table[key]:.0f}" if key in table else "n/a"


def ratio(a, ka, b, kb):
    return f"{a[ka] / b[kb]:.2f}" if ka in a and kb in b else "—"


modes = ["standard", "full", "block"]
label = {"standard": "standard", "full": "Full AttnRes", "block": "Block AttnRes (S = 4)"}
print(f"Model: d = 512, 8 layers (L = 16), 8 heads, ffn 1376, vocab 1024; T = {seq}; f32 and bf16.")
print(f"Peer: PyTorch {first_peer['torch_version']} eager, OPENBLAS_CORETYPE={core} "
      f"(OpenBLAS core {used}, {float(rate):.1f} GFLOP/s single-thread sgemm), "
      f"OMP_WAIT_POLICY={wait}, ATEN_CPU_CAPABILITY={cap_f32} (f32) / {cap_bf16} (bf16).")
print(f"Peer bf16: the f32 model under torch.autocast('cpu', dtype=torch.bfloat16); mkldnn on "
      f"(oneDNN bf16 GEMM {bf16_rate} GFLOP/s single-thread; torch.mm under autocast -> {autocast_mm}).")
if not any(k[2] == "f32" for k in ours):
    print("attnres: attnres bench forward unavailable" + (f" ({ours_note})" if ours_note else ""))
elif ours_support.endswith("0"):
    print("attnres bf16: n/a (`attnres bench forward --help` mentions no bf16).")
for m in sorted(mismatches):
    print(f"WARNING: attnres bench forward reported another precision than asked ({m}).")
print()
print("| mode | threads | attnres f32 | attnres bf16 | PyTorch f32 | PyTorch bf16 | "
      "attnres bf16 / f32 | attnres bf16 / PyTorch bf16 | attnres f32 / PyTorch f32 |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for threads in (1, 2):
    for mode in modes:
        f32, bf16 = (mode, threads, "f32"), (mode, threads, "bf16")
        print(f"| {label[mode]} | {threads} | {cell(ours, f32)} | {cell(ours, bf16)} | "
              f"{cell(peer, f32)} | {cell(peer, bf16)} | {ratio(ours, bf16, ours, f32)} | "
              f"{ratio(ours, bf16, peer, bf16)} | {ratio(ours, f32, peer, f32)} |")
print()
print("tokens/s, median of the timed passes; ratios of tokens/s (attnres bf16 / PyTorch bf16 "
      "above 1: attnres is faster).")


def ratio_line(title, table, pairs):
    parts = []
    for name, numerator, denominator in pairs:
        if numerator in table and denominator in table:
            parts.append(f"{name} {table[numerator] / table[denominator]:.2f}")
        else:
            parts.append(f"{name} —")
    print(f"{title}: " + ", ".join(parts))


print()
for p in ("f32", "bf16"):
    block_pairs = [(f"{t} thread{'s' if t > 1 else ''}", ("block", t, p), ("standard", t, p)) for t in (1, 2)]
    ratio_line(f"Block vs standard (ours, {p})", ours, block_pairs)
    ratio_line(f"Block vs standard (peer, {p})", peer, block_pairs)
    full_pairs = [(f"{t} thread{'s' if t > 1 else ''}", ("full", t, p), ("standard", t, p)) for t in (1, 2)]
    ratio_line(f"Full vs standard (ours, {p})", ours, full_pairs)
    ratio_line(f"Full vs standard (peer, {p})", peer, full_pairs)
    scaling = [(mode, (mode, 2, p), (mode, 1, p)) for mode in modes]
    ratio_line(f"2 threads / 1 thread (ours, {p})", ours, scaling)
    ratio_line(f"2 threads / 1 thread (peer, {p})", peer, scaling)
precision_pairs = [(f"{mode} {t}t", (mode, t, "bf16"), (mode, t, "f32")) for t in (1, 2) for mode in modes]
ratio_line("bf16 / f32 (peer)", peer, precision_pairs)
print("(tokens/s ratios: Block vs standard below 1 is the cost of Block AttnRes.)")
EOF
echo
echo "load average now: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs (timings are noisy when the machine is shared)"
