#!/usr/bin/env bash
# Writes resources/data/lab-corpus.txt: the project's own documentation as plain text, the
# training data of the shipped models and of the scenarios' [train] tables (docs/training.md).
# The copy in the repository is frozen (rerunning this after the docs change gives other data and
# so other trained models); the text is ours, so it may be redistributed with the project.
set -euo pipefail
cd "$(dirname "$0")/.."
out=resources/data/lab-corpus.txt
{
  for f in README.md docs/math.md docs/training.md docs/engines.md docs/scenarios.md docs/output-safety.md; do
    cat "$f"
    printf '\n'
  done
} > "$out.tmp"
mv "$out.tmp" "$out"
wc -c "$out"
