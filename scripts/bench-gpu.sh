#!/usr/bin/env bash
# bench_cuda on a GPU machine that cannot build KVScope (no HDF5, PCRE2 or GTest headers there):
#
#   scripts/bench-gpu.sh bundle          here: builds bench_cuda into build-gpu/ (no -march=native,
#                                        no GUI, sm_90 for H100/H200) and gathers it with the shared
#                                        libraries it needs into build-gpu/bundle/ (~35 MB; cuBLAS
#                                        and glibc are left out: the GPU machine has its own)
#   scripts/bench-gpu.sh run [ARGS...]   there, from the repository root, with build-gpu/bundle
#                                        carried: runs bench_cuda ARGS against the bundled libraries
#                                        and the machine's cuBLAS
#
# The bundle is built against this machine's glibc, which must not be newer than the GPU
# machine's (Debian 12's 2.36 here; Ubuntu 24.04's 2.39 there).
set -euo pipefail
cd "$(dirname "$0")/.."
bundle=build-gpu/bundle

case "${1:-}" in
bundle)
  jobs=$(nproc 2>/dev/null || echo 2)
  configured=$(cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DKVSCOPE_NATIVE=OFF -DKVSCOPE_GUI=OFF \
    -DKVSCOPE_BENCH=ON -DCMAKE_CUDA_ARCHITECTURES=90 2>&1) || { echo "$configured" >&2; exit 1; }
  if ! grep -q 'KVScope: CUDA ON' <<<"$configured"; then
    echo "bench-gpu.sh: this configuration has no CUDA backend (nvcc not found)" >&2
    exit 1
  fi
  cmake --build build-gpu -j"$jobs" --target bench_cuda
  rm -rf "$bundle"
  mkdir -p "$bundle/lib"
  cp build-gpu/bench_cuda "$bundle/"
  # Every shared library but glibc's own, the driver and cuBLAS (hundreds of MB; there already).
  ldd build-gpu/bench_cuda | awk '/=> \// {print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*|libresolv.so.*|ld-linux*) ;;
      libcuda.so.*|libcublas.so.*|libcublasLt.so.*) ;;
      *) cp -L "$lib" "$bundle/lib/" ;;
    esac
  done
  du -sh "$bundle"
  echo "carry build-gpu/bundle; on the GPU machine: scripts/bench-gpu.sh run --shape small"
  ;;
run)
  shift
  [[ -x $bundle/bench_cuda ]] || { echo "bench-gpu.sh: no $bundle/bench_cuda (run 'bundle' here and carry it)" >&2; exit 1; }
  # cuBLAS 13 from the CUDA toolkit or from PyTorch's wheels, wherever this machine has it.
  cublas=$(find /usr/local/cuda*/ /opt /usr/lib -name 'libcublas.so.13*' 2>/dev/null | head -1 || true)
  libs=$PWD/$bundle/lib
  [[ -n $cublas ]] && libs=$libs:$(dirname "$cublas")
  export LD_LIBRARY_PATH=$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  if ldd "$bundle/bench_cuda" | grep -q 'not found'; then
    echo "bench-gpu.sh: missing libraries:" >&2
    ldd "$bundle/bench_cuda" | grep 'not found' >&2
    exit 1
  fi
  exec "$bundle/bench_cuda" "$@"
  ;;
*)
  sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
  ;;
esac
