#!/usr/bin/env bash
# Installs the Debian packages xlite needs to build, test and run its examples.
# Idempotent and silent when everything is present; runs `apt-get update` at most once,
# and only when something is missing.
#
#   scripts/install-deps.sh                 build + test dependencies
#   scripts/install-deps.sh --bench-peers   also the libraries benchmarks compare against
set -euo pipefail

packages=(
  # toolchain: g++ for the main build, clang + its sanitizer runtime for the sanitize preset
  cmake ninja-build g++ clang libclang-rt-14-dev ccache pkg-config python3
  # what xlite's headers use: Boost.Hana, xtensor + xtl, xsimd; zlib for the optional zlib component
  libboost-dev libxtensor-dev xtl-dev libxsimd-dev zlib1g-dev
  # tests and benchmarks
  catch2 libbenchmark-dev nlohmann-json3-dev # the profiler's tests parse its JSON
  python3-numpy # the io tests exchange .npy and safetensors files with NumPy
  mlir-16-tools libmlir-16 # the MLIR export's tests verify, lower and run what it prints
  # runs of several processes: the MPI transport and its tests under mpirun
  libopenmpi-dev openmpi-bin
  # data: the Fashion-MNIST training example and the data tests
  dataset-fashion-mnist
)
bench_peers=(libeigen3-dev libopenblas-dev libdnnl-dev libtorch-dev)

for arg in "$@"; do
  case "$arg" in
    --bench-peers) packages+=("${bench_peers[@]}") ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) echo "install-deps.sh: unknown option '$arg' (try --help)" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [ "$status" = installed ] || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

as_root=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps.sh: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  as_root=(sudo)
fi
echo "install-deps.sh: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -qq
"${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
