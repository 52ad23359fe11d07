#!/usr/bin/env bash
# Installs the Debian 12 packages that AttnRes Lab builds, tests and renders with, skipping those
# already present. Run as root (the quick start does). Safe to run again.
set -euo pipefail

# ocl-icd-opencl-dev: Debian's dnnl-config.cmake requires OpenCL (libdnnl-dev only recommends it).
packages=(
  build-essential cmake ninja-build pkg-config
  libeigen3-dev libboost-program-options-dev libtomlplusplus-dev nlohmann-json3-dev
  libdnnl-dev ocl-icd-opencl-dev libgtest-dev libgmock-dev libbenchmark-dev libgif-dev
  qt6-base-dev libqt6opengl6-dev qt6-charts-dev qt6-svg-dev fonts-dejavu-core
  python3-numpy python3-jsonschema
  clang-14 libclang-rt-14-dev clang-format-14 git
)

source "$(dirname "${BASH_SOURCE[0]}")/install-packages.sh"
install_packages install-deps "${packages[@]}"
