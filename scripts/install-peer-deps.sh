#!/usr/bin/env bash
# Installs what the PyTorch peer benchmark (bench/peers/) needs, skipping what is present:
# Debian 12's PyTorch (python3-torch, CPU, for /usr/bin/python3), numpy, and the pthread build
# of OpenBLAS that PyTorch's libblas.so.3 resolves to. Opt-in: NOT part of the quick start
# (python3-torch and its dependencies are a large download). Run as root. Safe to run again.
#
#   sudo bash scripts/install-peer-deps.sh
#   bash bench/peers/compare.sh
set -euo pipefail

packages=(
  python3-torch
  python3-numpy
  libopenblas0-pthread
)

source "$(dirname "${BASH_SOURCE[0]}")/install-packages.sh"
install_packages install-peer-deps "${packages[@]}"

# The peer runs under Debian's python (python3 on PATH may be another one, e.g. pyenv's).
if ! /usr/bin/python3 -c "import torch, numpy" 2>/dev/null; then
  echo "install-peer-deps: /usr/bin/python3 still cannot import torch and numpy" >&2
  exit 1
fi
blas="$(readlink -f /etc/alternatives/libblas.so.3-x86_64-linux-gnu 2>/dev/null || true)"
echo "install-peer-deps: torch $(/usr/bin/python3 -c 'import torch; print(torch.__version__)'), libblas.so.3 -> ${blas:-?}"
case "$blas" in
  *openblas*) ;;
  *) echo "install-peer-deps: note: libblas.so.3 is not OpenBLAS; PyTorch's sgemm will be slow" \
       "(update-alternatives --config libblas.so.3-x86_64-linux-gnu)" >&2 ;;
esac
