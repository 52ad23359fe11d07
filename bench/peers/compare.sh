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
# Prescott kernel); (3) at 2 threads, the OpenMP wait policy that suits the peer on this machine
# now (spinning threads collapse when the cores are shared with other work); (4) for threads 1
# and 2 and modes standard / full / block (S = 4): `attnres bench forward ... --format json`
# and the peer with the same settings; (5) a Markdown table and ratios.
#
# Needs /usr/bin/python3 with python3-torch (bash scripts/install-peer-deps.sh).
# Environment: ATTNRES_PEER_SEQ (default 256), ATTNRES_PEER_REPEAT (default 5).
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
echo "== 2. the peer's BLAS (torch.mm 1024 x 1024 f32, 1 thread, best of 2 runs x 5)"
libblas="$(readlink -f /etc/alternatives/libblas.so.3-x86_64-linux-gnu 2>/dev/null || echo '?')"
echo "   torch links libblas.so.3 -> $libblas"
best_core="unset"
best_rate=0
for core in unset Haswell SkylakeX Cooperlake SapphireRapids; do
  rate=0
  used="?"
  for _ in 1 2; do
    if peer_env "$core" unset "$python" "$peer" --gemm-probe --threads 1 --format json \
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
peer_env "$best_core" unset "$python" "$peer" --gemm-probe --threads 1 --format json >"$work/gemm.json"
best_used="$(json_field "$work/gemm.json" blas.openblas_corename)"
echo "   chosen: OPENBLAS_CORETYPE=$best_core (OpenBLAS core $best_used), $best_rate GFLOP/s single-thread sgemm"
echo "   $(json_field "$work/gemm.json" blas.openblas_config)"

echo
echo "== 3. the peer's OpenMP wait policy at 2 threads (standard, T = $seq, median of 2)"
best_wait="unset"
best_tps=0
for wait in unset PASSIVE; do
  tps=0
  if peer_env "$best_core" "$wait" "$python" "$peer" --model "$model" --seq "$seq" --mode standard \
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

echo
echo "== 4. forward passes: T = $seq, repeat $repeat (median), f32"
ours_available=1
ours_note=""
results="$work/results.txt"
: >"$results"
for threads in 1 2; do
  for mode in standard full block; do
    extra=()
    [ "$mode" = block ] && extra=(--block-size "$block_size")
    ours="$work/ours-$mode-$threads.json"
    theirs="$work/peer-$mode-$threads.json"
    if [ "$ours_available" = 1 ]; then
      tps=""
      if "$attnres" bench forward --model "$model" --seq "$seq" --repeat "$repeat" \
          --threads "$threads" --mode "$mode" "${extra[@]}" --format json \
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
    peer_env "$best_core" "$best_wait" "$python" "$peer" --model "$model" --seq "$seq" \
      --mode "$mode" "${extra[@]}" --threads "$threads" --repeat "$repeat" --tokens-seed 0 \
      --format json >"$theirs" || die "the peer failed ($mode, $threads threads)"
    echo "$mode $threads $ours $theirs" >>"$results"
    printf '   %-8s %d thread(s): attnres %s, peer %.0f tokens/s\n' "$mode" "$threads" \
      "$( [ -f "$ours" ] && printf '%.0f tokens/s' "$(json_field "$ours" tokens_per_second)" || echo unavailable)" \
      "$(json_field "$theirs" tokens_per_second)"
  done
done

echo
echo "== 5. results"
"$python" - "$results" "$seq" "$best_core" "$best_used" "$best_rate" "$best_wait" "$ours_note" <<'EOF'
import json, os, sys

results, seq, core, used, rate, wait, ours_note = sys.argv[1:8]
ours, peer = {}, {}
first_peer = None
for line in open(results):
    mode, threads, ours_path, peer_path = line.split()
    key = (mode, int(threads))
    if os.path.exists(ours_path):
        ours[key] = json.load(open(ours_path))["tokens_per_second"]
    peer_json = json.load(open(peer_path))
    peer[key] = peer_json["tokens_per_second"]
    first_peer = first_peer or peer_json

modes = ["standard", "full", "block"]
label = {"standard": "standard", "full": "Full AttnRes", "block": "Block AttnRes (S = 4)"}
unavailable = "attnres bench forward unavailable"
print(f"Model: d = 512, 8 layers (L = 16), 8 heads, ffn 1376, vocab 1024; T = {seq}; f32.")
print(f"Peer: PyTorch {first_peer['torch_version']} eager, OPENBLAS_CORETYPE={core} "
      f"(OpenBLAS core {used}, {float(rate):.1f} GFLOP/s single-thread sgemm), "
      f"OMP_WAIT_POLICY={wait}.")
if not ours:
    print(f"attnres: {unavailable}" + (f" ({ours_note})" if ours_note else ""))
print()
print("| mode | threads | attnres tokens/s | PyTorch tokens/s | ratio |")
print("|---|---:|---:|---:|---:|")
for threads in (1, 2):
    for mode in modes:
        key = (mode, threads)
        if key in ours:
            print(f"| {label[mode]} | {threads} | {ours[key]:.0f} | {peer[key]:.0f} | "
                  f"{ours[key] / peer[key]:.2f} |")
        else:
            print(f"| {label[mode]} | {threads} | {unavailable} | {peer[key]:.0f} | — |")
print()
print("ratio = attnres tokens/s / PyTorch tokens/s (above 1: attnres is faster).")


def ratio_line(title, table, pairs):
    parts = []
    for name, numerator, denominator in pairs:
        if numerator in table and denominator in table:
            parts.append(f"{name} {table[numerator] / table[denominator]:.2f}")
        else:
            parts.append(f"{name} —")
    print(f"{title}: " + ", ".join(parts))


print()
block_pairs = [(f"{t} thread{'s' if t > 1 else ''}", ("block", t), ("standard", t)) for t in (1, 2)]
ratio_line("Block vs standard (ours)", ours, block_pairs)
ratio_line("Block vs standard (peer)", peer, block_pairs)
full_pairs = [(f"{t} thread{'s' if t > 1 else ''}", ("full", t), ("standard", t)) for t in (1, 2)]
ratio_line("Full vs standard (ours)", ours, full_pairs)
ratio_line("Full vs standard (peer)", peer, full_pairs)
scaling = [(mode, (mode, 2), (mode, 1)) for mode in modes]
ratio_line("2 threads / 1 thread (ours)", ours, scaling)
ratio_line("2 threads / 1 thread (peer)", peer, scaling)
print("(tokens/s ratios: Block vs standard below 1 is the cost of Block AttnRes.)")
EOF
echo
echo "load average now: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs (timings are noisy when the machine is shared)"
