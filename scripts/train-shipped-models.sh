#!/usr/bin/env bash
# Retrains the models in resources/models/ from scenarios/shipped-models.toml and copies them there
# (config.json, model.safetensors, train_log.csv per model), with the report beside them.
# Usage: scripts/train-shipped-models.sh [ATTNRES_BINARY]   (default build/main/app/cli/attnres)
set -euo pipefail
cd "$(dirname "$0")/.."
attnres="${1:-build/main/app/cli/attnres}"
out="${TMPDIR:-/tmp}/attnres-shipped-models"
"$attnres" report scenarios/shipped-models.toml --out "$out" --force
for model in standard full block_N4 block_N2; do
  mkdir -p "resources/models/$model"
  cp "$out/models/$model/config.json" "$out/models/$model/model.safetensors" "$out/models/$model/train_log.csv" \
     "resources/models/$model/"
done
cp "$out/report.md" resources/models/training-report.md
cp "$out/report.json" resources/models/training-report.json
rm -rf resources/models/charts && cp -r "$out/charts" resources/models/charts
echo "resources/models/: $(du -sh resources/models | cut -f1)"
