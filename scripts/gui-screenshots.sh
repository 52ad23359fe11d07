#!/usr/bin/env bash
# Renders the README's screenshots of attnres-lab, offscreen, from the steps of the guided lesson
# (docs/teaching.md): each view at 1400x900 in the state a lesson step leaves it, the lesson bar at
# a projector's 1024x700, and presentation mode at 1024x768. The Training view's picture comes from
# scripts/training-screenshot.sh (it needs a finished training run).
#   scripts/gui-screenshots.sh [BUILD_DIR] [OUT_DIR]     (defaults: build/ci, docs/images)
set -euo pipefail
build="${1:-build/ci}"
out="${2:-docs/images}"
lab="$build/app/gui/attnres-lab"
if [[ ! -x "$lab" ]]; then
  echo "gui-screenshots: $lab not found; build it first (cmake --build $build --target attnres-lab)" >&2
  exit 2
fi
mkdir -p "$out"
shot() {  # NAME VIEW STEP [extra options...]
  local name="$1" view="$2" step="$3"
  shift 3
  QT_QPA_PLATFORM=offscreen "$lab" --view "$view" --lesson-step "$step" "$@" --screenshot "$out/$name.png"
  echo "wrote $out/$name.png"
}
shot gui-magnitudes magnitudes 1 --size 1400x900
shot gui-depth-attention depth-attention 4 --size 1400x900
shot gui-read depth-attention 5 --size 1400x900
shot gui-duality duality 6 --size 1400x900
shot gui-cost cost 8 --size 1400x900
shot gui-pipeline pipeline 10 --size 1400x900
shot gui-scaling scaling 12 --size 1400x900
shot gui-lesson depth-attention 3 --size 1024x700
shot gui-presentation pipeline 10 --size 1024x768 --presentation
# The routing statistics of a Kimi K3 checkpoint made outside the lab (tests/interop, docs/interop.md).
QT_QPA_PLATFORM=offscreen "$lab" --view depth-attention --model tests/interop/fixtures/k3_qwen3_bf16_sharded \
  --page "routing statistics" --size 1400x900 --screenshot "$out/gui-routing.png"
echo "wrote $out/gui-routing.png"
