#!/usr/bin/env bash
# Writes resources/data/lab-corpus.txt, the training data of the shipped models and of the
# scenarios' [train] tables (docs/training.md): the project's own documentation, then the texts of
# seven free-software licences as Debian ships them in /usr/share/common-licenses (each licence
# permits copying and distributing verbatim copies of its text). resources/data/README.md says
# what is in it. The copy in the repository is frozen: rerunning this after the docs change gives
# other data, and so other trained models.
set -euo pipefail
cd "$(dirname "$0")/.."
out=resources/data/lab-corpus.txt
{
  for f in README.md docs/math.md docs/training.md docs/engines.md docs/scenarios.md docs/output-safety.md; do
    cat "$f"
    printf '\n'
  done
  for f in GPL-3 GPL-2 LGPL-2.1 Apache-2.0 MPL-2.0 GFDL-1.3 Artistic; do
    cat "/usr/share/common-licenses/$f"
    printf '\n'
  done
} > "$out.tmp"
mv "$out.tmp" "$out"
wc -c "$out"
