#!/usr/bin/env bash
# The GPU checks in one go (about 5 minutes on a machine with an NVIDIA GPU, e.g. an H200):
#   1. configure and build Release with CUDA for sm_90 (the CLI, the engine and kernel tests)
#   2. the CUDA test cases: tests/engine/test_cuda_forward.cpp (the CUDA engine against the
#      reference) and tests/kernels/test_backend_ops.cpp (the depth-read kernel)
#   3. attnres bench forward --device cuda on a d = 512, 8-layer model at T = 256 and T = 4096 for
#      standard, full and block (S = 4), plus the fast CPU engine at T = 256 for comparison
# Results (logs, gtest XML, one JSON per benchmark, summary.txt) go to $OUT when it is set, else
# build/gpu-checks/. Exit status: 0 when every step passed, else the number of failed steps.
#
#   bash bench/gpu/run_gpu_checks.sh                 # from the repository root
#   OUT=/tmp/results JOBS=8 bash bench/gpu/run_gpu_checks.sh
#   CUDA_ARCH=75 bash bench/gpu/run_gpu_checks.sh     # another GPU generation
#   MARCH=x86-64 bash bench/gpu/run_gpu_checks.sh     # a generic x86-64 host build
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
RESULTS=${OUT:-$ROOT/build/gpu-checks}
BUILD=${BUILD_DIR:-$ROOT/build/gpu}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 4)}
CUDA_ARCH=${CUDA_ARCH:-90}
# The quick start's build (-march=native, which the top-level CMakeLists passes to nvcc's host
# compiler too, so that Eigen allocates the same way in .cu and .cpp files).
MARCH=${MARCH:-native}
mkdir -p "$RESULTS"
SUMMARY=$RESULTS/summary.txt
: >"$SUMMARY"
failures=0

note() { echo "$*" | tee -a "$SUMMARY"; }
step() {  # step NAME COMMAND...: runs, logs to $RESULTS/NAME.log, records pass/fail and seconds
  local name=$1
  shift
  local start=$SECONDS
  "$@" >"$RESULTS/$name.log" 2>&1
  local status=$?
  if [ $status -eq 0 ]; then
    note "PASS  $name ($((SECONDS - start)) s)"
  else
    note "FAIL  $name (exit $status, $((SECONDS - start)) s): see $name.log"
    tail -n 30 "$RESULTS/$name.log" | sed 's/^/      /' | tee -a "$SUMMARY"
    failures=$((failures + 1))
  fi
  return $status
}

note "AttnRes Lab GPU checks, $(date -u +%Y-%m-%dT%H:%M:%SZ), $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo 'no git')"
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi >"$RESULTS/nvidia-smi.txt" 2>&1
  note "GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -n 1)"
else
  note "nvidia-smi not found"
fi
export PATH=$PATH:/usr/local/cuda/bin

# 1. Build.
step configure cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DATTNRES_ENABLE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCH" -DATTNRES_MARCH="$MARCH" \
  -DATTNRES_BUILD_GUI=OFF -DATTNRES_BUILD_BENCHMARKS=OFF -DATTNRES_BUILD_TESTS=ON || {
  note "configure failed: nothing else can run"
  exit 1
}
step build cmake --build "$BUILD" --target attnres engine_tests kernel_tests -j "$JOBS" || {
  note "build failed: nothing else can run"
  exit 1
}

# 2. Tests (every CUDA case; a case that skips says why in the log, and a skip is reported).
step kernel_tests_cuda "$BUILD/tests/kernel_tests" --gtest_filter='*cuda*:*Cuda*' \
  --gtest_output="xml:$RESULTS/kernel_tests_cuda.xml"
step engine_tests_cuda "$BUILD/tests/engine_tests" --gtest_filter='*Cuda*:*cuda*' \
  --gtest_output="xml:$RESULTS/engine_tests_cuda.xml"
have_gpu=0
nvidia-smi -L >/dev/null 2>&1 && have_gpu=1
for log in kernel_tests_cuda engine_tests_cuda; do
  if grep -q "SKIPPED" "$RESULTS/$log.log" 2>/dev/null; then
    note "NOTE  $log skipped cases: $(grep -m 1 -A 1 'Skipped' "$RESULTS/$log.log" | tail -n 1)"
    if [ $have_gpu -eq 1 ] && grep -q "no CUDA device" "$RESULTS/$log.log"; then
      note "FAIL  $log: CUDA cases skipped although nvidia-smi sees a GPU"
      failures=$((failures + 1))
    fi
  fi
done

# 3. Benchmarks.
ATTNRES=$BUILD/app/cli/attnres
MODEL=$RESULTS/model-d512-l8
step init_model "$ATTNRES" init-model --layers 8 --d-model 512 --heads 8 --kv-heads 8 --ffn 1376 \
  --vocab 32000 --seed 1 --query-std 0.05 --out "$MODEL" --force
# shellcheck disable=SC2317  # (called through step)
bench_json() {  # stdout (the JSON) to bench_NAME.json; stderr (progress) goes to the step's log
  local name=$1
  shift
  "$ATTNRES" bench forward --model "$MODEL" --repeat 5 --bandwidth off --format json "$@" >"$RESULTS/bench_$name.json"
}
bench() {  # bench NAME ARGS...: one JSON per run
  local name=$1
  shift
  step "bench_$name" bench_json "$name" "$@" || rm -f "$RESULTS/bench_$name.json"
}
for T in 256 4096; do
  bench "cuda_standard_T$T" --device cuda --seq "$T" --mode standard
  bench "cuda_full_T$T" --device cuda --seq "$T" --mode full
  bench "cuda_block_T$T" --device cuda --seq "$T" --mode block --block-size 4
done
for mode in standard full; do
  bench "cpu_${mode}_T256" --device cpu --seq 256 --mode "$mode"
done
bench "cpu_block_T256" --device cpu --seq 256 --mode block --block-size 4

note ""
note "benchmark                 tokens_per_second   seconds_per_forward"
for json in "$RESULTS"/bench_*.json; do
  [ -e "$json" ] || continue
  name=$(basename "$json" .json)
  tps=$(grep -o '"tokens_per_second": *[0-9.eE+-]*' "$json" | head -n 1 | sed 's/.*: *//')
  spf=$(grep -o '"seconds_per_forward": *[0-9.eE+-]*' "$json" | head -n 1 | sed 's/.*: *//')
  note "$(printf '%-25s %-14s %s' "${name#bench_}" "$tps" "$spf")"
done
note ""
note "failed steps: $failures (results in $RESULTS)"
exit "$failures"
