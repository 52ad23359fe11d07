#!/usr/bin/env bash
# Renders the Training view of attnres-lab after a full default run (three schemes, 200 steps, the
# built-in sample text) into a PNG, offscreen. The picture comes from the GUI test that checks the
# view draws every panel.
#   scripts/training-screenshot.sh [BUILD_DIR] [OUT.png]     (defaults: build/ci, training_view.png)
set -euo pipefail
build="${1:-build/ci}"
out="${2:-training_view.png}"
tests="$build/tests/gui_tests"
if [[ ! -x "$tests" ]]; then
  echo "training-screenshot: $tests not found; build it first (cmake --build $build --target gui_tests)" >&2
  exit 2
fi
QT_QPA_PLATFORM=offscreen ATTNRES_TRAINING_SCREENSHOT="$out" \
  "$tests" --gtest_filter='Gui.TrainingViewDefaultRunDrawsEveryPanel'
echo "wrote $out"
