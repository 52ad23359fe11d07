#!/bin/sh
# `cmake --install` into a temporary prefix, then the programs run from there, outside the source
# and build trees: the main job (the default scenario's report, with its training cut to 2 steps:
# what is checked here is that the installed program finds its scenario, corpus and models; the
# main job's numbers are docs_quote_the_main_job's, in the build tree) and an attnres-lab
# screenshot on the installed trained models.
#   install_runs_from_prefix.sh BUILD_DIR
set -eu
build="$1"
work=$(mktemp -d "${TMPDIR:-/tmp}/attnres-install.XXXXXX")
trap 'rm -rf "$work"' EXIT
p="$work/prefix"
cmake --install "$build" --prefix "$p" > "$work/install.log"
fail() { echo "install test: $*" >&2; exit 1; }
for f in bin/attnres bin/attnres-lab; do [ -x "$p/$f" ] || fail "$f missing"; done
for f in share/applications/attnres-lab.desktop share/icons/hicolor/scalable/apps/attnres-lab.svg \
         share/attnres/scenarios/block-size-tradeoff.toml share/attnres/resources/data/lab-corpus.txt \
         share/attnres/resources/hardware/h100.toml share/attnres/models/full/config.json \
         share/attnres/models/full/model.safetensors share/doc/attnres_lab/README.md \
         share/doc/attnres_lab/docs/teaching.md share/doc/attnres_lab/docs/math.md; do
  [ -f "$p/$f" ] || fail "$f missing"
done
grep -q '^Exec=attnres-lab$' "$p/share/applications/attnres-lab.desktop" || fail "desktop entry without Exec"
version=$("$p/bin/attnres" --version)
[ "$version" = "$("$p/bin/attnres-lab" --version | sed 's/attnres-lab/attnres/')" ] || fail "versions differ: $version"
cd "$work"  # nothing relative to the source tree
"$p/bin/attnres" report "$p/share/attnres/scenarios/block-size-tradeoff.toml" --train-steps 2 \
  --out "$work/report" > "$work/report.log"
[ -f "$work/report/report.md" ] || fail "the main job wrote no report"
grep -q "^## Measured quality" "$work/report/report.md" || fail "the report has no training section"
env -u ATTNRES_MODELS_DIR QT_QPA_PLATFORM=offscreen "$p/bin/attnres-lab" --models > "$work/models.txt" 2>/dev/null
grep -q "^models directory: $p/share/attnres/models$" "$work/models.txt" || fail "attnres-lab does not use the installed models: $(cat "$work/models.txt")"
grep -q "^full: " "$work/models.txt" || fail "the installed Full model is not found"
env -u ATTNRES_MODELS_DIR QT_QPA_PLATFORM=offscreen "$p/bin/attnres-lab" --view depth-attention \
  --screenshot "$work/shot.png" > "$work/shot.log" 2>&1 || fail "screenshot failed: $(cat "$work/shot.log")"
[ -s "$work/shot.png" ] || fail "empty screenshot"
echo "installed, ran the main job and a screenshot from $p"
# The .deb (the `deb` package preset is this CPack configuration): the programs, the desktop entry,
# the models and the docs, installed under /usr.
if command -v cpack > /dev/null && command -v dpkg-deb > /dev/null; then
  (cd "$build" && cpack -G DEB -B "$work/deb" > "$work/cpack.log" 2>&1) || fail "cpack: $(tail -5 "$work/cpack.log")"
  deb=$(ls "$work"/deb/*.deb)
  dpkg-deb -c "$deb" > "$work/deb.txt"
  for f in ./usr/bin/attnres ./usr/bin/attnres-lab ./usr/share/applications/attnres-lab.desktop \
           ./usr/share/attnres/models/full/model.safetensors ./usr/share/doc/attnres_lab/docs/teaching.md; do
    grep -q " $f\$" "$work/deb.txt" || fail "$f is not in $deb"
  done
  dpkg-deb -f "$deb" Depends | grep -q libqt6widgets6 || fail "the .deb does not depend on Qt"
  echo "packaged $(basename "$deb")"
fi
