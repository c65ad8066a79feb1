#!/usr/bin/env bash
# The CUDA tests and bench_cuda on a GPU machine that cannot build KVScope (no HDF5, PCRE2 or
# GTest headers there), through the device tool's carried folders (64 MiB per call):
#
#   scripts/gpu-bundle.sh bundle         here: builds the CUDA test programs, bench_cuda and kvscope into
#                                        build-gpu/ (no -march=native, no GUI, sm_90 for H100/H200)
#                                        and gathers them, the shared libraries they need (not
#                                        cuBLAS or glibc: the GPU machine has its own) and
#                                        stories260K into build-gpu/bundle/; SmolLM2 (when in the
#                                        model cache) is split into build-gpu/smollm.part-* to
#                                        carry in later calls
#   scripts/gpu-bundle.sh stash          there: keeps a carried SmolLM2 part for later calls
#   scripts/gpu-bundle.sh test           there: runs every CUDA test program (SmolLM2 too once all
#                                        its parts arrived), then `kvscope record` on both devices
#   scripts/gpu-bundle.sh bench [ARGS]   there: runs bench_cuda ARGS
#
# The bundle is built against this machine's glibc, which must not be newer than the GPU
# machine's (Debian 12's 2.36 here).
set -euo pipefail
cd "$(dirname "$0")/.."
bundle=build-gpu/bundle
smollm=SmolLM2-135M-Instruct.Q4_1.gguf

# Points the programs at the bundled libraries and the machine's cuBLAS 13.
use_bundle() {
  [[ -d $bundle/bin ]] || { echo "gpu-bundle.sh: no $bundle (run 'bundle' here and carry it)" >&2; exit 1; }
  local cublas libs=$PWD/$bundle/lib
  cublas=$(find /usr/local/cuda*/ /opt /usr/lib /usr/local/lib -name 'libcublas.so.13*' 2>/dev/null | head -1 || true)
  [[ -n $cublas ]] && libs=$libs:$(dirname "$cublas")
  export LD_LIBRARY_PATH=$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export KVSCOPE_SHARED_DIR=$PWD/$bundle/shared
  stash_parts
  local want
  want=$(cat "$bundle/smollm.md5" 2>/dev/null || true)
  if [[ -n $want && ! -f build-gpu/cache/$smollm ]] && ls build-gpu/stash/smollm.part-* >/dev/null 2>&1; then
    mkdir -p build-gpu/cache
    cat build-gpu/stash/smollm.part-* > "build-gpu/cache/$smollm.tmp"
    if [[ $(md5sum < "build-gpu/cache/$smollm.tmp" | cut -d' ' -f1) == "$want" ]]; then
      mv "build-gpu/cache/$smollm.tmp" "build-gpu/cache/$smollm"
    else
      rm -f "build-gpu/cache/$smollm.tmp"
      echo "gpu-bundle.sh: SmolLM2 incomplete ($(ls build-gpu/stash | wc -l) parts so far); its test will skip"
    fi
  fi
  [[ -f build-gpu/cache/$smollm ]] && export KVSCOPE_CACHE=$PWD/build-gpu/cache
  local missing
  missing=$(for p in "$bundle"/bin/*; do ldd "$p" | grep 'not found' || true; done | sort -u)
  if [[ -n $missing ]]; then
    echo "gpu-bundle.sh: missing libraries: $missing" >&2
    exit 1
  fi
}

# A carried path is replaced (or removed) by the next call's carry list, so the SmolLM2 parts
# that arrive one per call move to build-gpu/stash, which no carry names.
stash_parts() {
  if ls build-gpu/smollm.part-* >/dev/null 2>&1; then
    mkdir -p build-gpu/stash
    mv build-gpu/smollm.part-* build-gpu/stash/
  fi
}

case "${1:-}" in
bundle)
  jobs=$(nproc 2>/dev/null || echo 2)
  configured=$(cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DKVSCOPE_NATIVE=OFF -DKVSCOPE_GUI=OFF \
    -DKVSCOPE_BENCH=ON -DCMAKE_CUDA_ARCHITECTURES=90 2>&1) || { echo "$configured" >&2; exit 1; }
  if ! grep -q 'KVScope: CUDA ON' <<<"$configured"; then
    echo "gpu-bundle.sh: this configuration has no CUDA backend (nvcc not found)" >&2
    exit 1
  fi
  programs=(bench_cuda inference_engine_cuda_test kvscope)
  for src in tests/kernels/cuda_*_test.cpp; do programs+=("kernels_$(basename "$src" .cpp)"); done
  cmake --build build-gpu -j"$jobs" --target "${programs[@]}"
  rm -rf "$bundle" build-gpu/smollm.part-* build-gpu/stash build-gpu/cache
  mkdir -p "$bundle/bin" "$bundle/lib" "$bundle/shared/models"
  for p in "${programs[@]}"; do strip -o "$bundle/bin/$p" "build-gpu/$p"; done
  # Every shared library but glibc's own, the driver and cuBLAS (hundreds of MB; there already).
  for p in "${programs[@]}"; do ldd "build-gpu/$p"; done | awk '/=> \// {print $3}' | sort -u | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*|libresolv.so.*|ld-linux*) ;;
      libcuda.so.*|libcublas.so.*|libcublasLt.so.*) ;;
      *) cp -L "$lib" "$bundle/lib/" ;;
    esac
  done
  cp -r ../shared/models/stories260K "$bundle/shared/models/"
  cache=${KVSCOPE_CACHE:-$HOME/.cache/kvscope/models}
  if [[ -f $cache/$smollm ]]; then
    # Three parts of ~32 MB: each fits a call beside the working tree (~21 MB) under 64 MiB.
    split -n 3 -d "$cache/$smollm" build-gpu/smollm.part-
    md5sum < "$cache/$smollm" | cut -d' ' -f1 > "$bundle/smollm.md5"
  fi
  du -sh "$bundle" build-gpu/smollm.part-* 2>/dev/null || true
  echo "carry build-gpu/bundle (and, one per call, build-gpu/smollm.part-NN); then: scripts/gpu-bundle.sh test"
  ;;
stash)
  stash_parts
  ;;
test)
  use_bundle
  status=0
  for p in "$bundle"/bin/*_test; do
    echo "== $(basename "$p")"
    "$p" --gtest_brief=1 || status=1
  done
  # End to end: the CLI prints the same greedy story on both devices, and the GPU's trace reads.
  echo "== kvscope record stories260K, --device cpu and cuda"
  m=$bundle/shared/models/stories260K
  for d in cpu cuda; do
    "$bundle/bin/kvscope" record --model "$m/stories260K.bin" --tokenizer "$m/tok512.bin" \
      --prompt "Once upon a time" --steps 60 --device "$d" --out "/tmp/kvscope-$d.h5" >"/tmp/kvscope-$d.txt" || status=1
  done
  if cmp -s /tmp/kvscope-cpu.txt /tmp/kvscope-cuda.txt; then
    echo "same text: $(cat /tmp/kvscope-cuda.txt)"
  else
    echo "the texts differ:"; cat /tmp/kvscope-cpu.txt /tmp/kvscope-cuda.txt; status=1
  fi
  "$bundle/bin/kvscope" info /tmp/kvscope-cuda.h5 || status=1
  exit $status
  ;;
bench)
  shift
  use_bundle
  exec "$bundle/bin/bench_cuda" "$@"
  ;;
*)
  sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
  ;;
esac
