#!/usr/bin/env bash
# The CUDA tests, bench_cuda and HF's eager baseline on a GPU machine of the device tool, which
# cannot build KVScope (no HDF5, PCRE2 or GTest headers there) and takes 64 MiB per call, the
# working tree included; docs/gpu.md says how the calls go within a session's device time.
#
#   scripts/gpu-bundle.sh bundle         here: builds the CUDA test programs, the benchmarks and kvscope
#                                        into build-gpu/ (no -march=native, no GUI, sm_90 for
#                                        H100/H200), gathers them, the shared libraries they need
#                                        (not cuBLAS or glibc: the GPU machine has its own) and
#                                        stories260K into build-gpu/bundle.tar.xz, and splits
#                                        SmolLM2 (when in the model cache) into build-gpu/smollm.part-*,
#                                        the first small enough to travel beside the bundle
#   scripts/gpu-bundle.sh check [SECS]   there, one call (carry the bundle and part 00): every CUDA
#                                        test program, `kvscope record` on both devices,
#                                        bench_controller_host on the host's cores, bench_cuda
#                                        in fp16 and fp32 on SmolLM2-135M's shape, then on the
#                                        Llama-3-8B shape (fp16, overlapped launches on and
#                                        off), HF eager beside it, bench_cuda in bf16 (and H2O
#                                        live), bench_record_host on the host's cores and disk,
#                                        each under a time cap so that all ends within SECS
#                                        (default 560); logs in $OUT, a summary last
#   scripts/gpu-bundle.sh smollm         there, one call per further part: keeps it; once all are
#                                        there, the SmolLM2 comparisons (greedy tokens, and traces
#                                        recorded on both devices compared row by row: auto's, fp32
#                                        for this model, every decode row within 1e-3; fp16's 1e-2)
#   scripts/gpu-bundle.sh profile        there, if device time remains: ncu on one launch of each
#                                        decode kernel (the products, attention at 32K keys)
#   scripts/gpu-bundle.sh test           there: every CUDA test program, then `kvscope record` on both devices
#                                        (auto, fp32 for stories260K: every decode row within 1e-3
#                                        of the CPU's; fp16: within 1e-2)
#   scripts/gpu-bundle.sh bench [ARGS]   there: bench_cuda ARGS
#
# The bundle is built against this machine's glibc, which must not be newer than the GPU
# machine's (Debian 12's 2.36 here).
set -euo pipefail
cd "$(dirname "$0")/.."
bundle=build-gpu/bundle
smollm=SmolLM2-135M-Instruct.Q4_1.gguf
out=${OUT:-build-gpu/out}  # the device tool's folder of files to bring back

# Points the programs at the bundled libraries and the machine's cuBLAS 13.
use_bundle() {
  if [[ -f $bundle.tar.xz && ( ! -d $bundle/bin || $bundle.tar.xz -nt $bundle/bin ) ]]; then
    rm -rf "$bundle"
    python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" "$bundle.tar.xz" build-gpu
    touch "$bundle/bin"
  fi
  [[ -d $bundle/bin ]] || { echo "gpu-bundle.sh: no $bundle.tar.xz (run 'bundle' here and carry it)" >&2; exit 1; }
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
# that arrive one per call move to build-gpu/stash, which no carry names; the unpacked bundle
# stays in build-gpu/bundle likewise while the machine is warm.
stash_parts() {
  if ls build-gpu/smollm.part-* >/dev/null 2>&1; then
    mkdir -p build-gpu/stash
    mv build-gpu/smollm.part-* build-gpu/stash/
  fi
}

# record_both NAME ARGS...: `kvscope record ARGS` on the CPU, then on the GPU with the default
# storage (auto: fp32 for models as small as stories260K and SmolLM2-135M), then in fp16. Each GPU
# run must tell the CPU's text; auto's trace must have every decode row within 1e-3 of the CPU's,
# fp16's within 1e-2 (tests/python/compare_traces.py; docs/gpu.md, Accuracy).
record_both() {
  local name=$1 status=0 dtype tol run
  shift
  "$bundle/bin/kvscope" record "$@" --device cpu --out "/tmp/kvscope-$name-cpu.h5" >"/tmp/kvscope-$name-cpu.txt" \
    || status=1
  for dtype in auto fp16; do
    tol=1e-3
    [[ $dtype == fp16 ]] && tol=1e-2
    run=/tmp/kvscope-$name-$dtype
    echo "== $name on the GPU, --gpu-dtype $dtype: the CPU's text, every decode row within $tol of the CPU's"
    "$bundle/bin/kvscope" record "$@" --device cuda --gpu-dtype "$dtype" --out "$run.h5" >"$run.txt" || status=1
    if cmp -s "/tmp/kvscope-$name-cpu.txt" "$run.txt"; then
      echo "$name: same text on both devices: $(head -c 400 "$run.txt")"
    else
      echo "$name: the texts differ:"; cat "/tmp/kvscope-$name-cpu.txt" "$run.txt"; status=1
    fi
    python3 tests/python/compare_traces.py "/tmp/kvscope-$name-cpu.h5" "$run.h5" --tol "$tol" || status=1
  done
  return $status
}

# capped CAP LOG CMD...: CMD, its output in $out/LOG, stopped after CAP seconds or when the check's
# budget (less 10 s) runs out, whichever comes first; one line says how it ended.
capped() {
  local cap=$1 log=$2 t rc
  shift 2
  t=$(( budget - SECONDS - 10 ))
  (( t > cap )) && t=$cap
  if (( t < 20 )); then
    echo "skipped, no time left: $*" | tee -a "$out/$log"
    return 0
  fi
  local t0=$SECONDS
  rc=0
  timeout -k 5 "$t" "$@" >>"$out/$log" 2>&1 || rc=$?
  (( rc == 124 || rc == 137 )) && echo "stopped at its cap of $t s: $*" >>"$out/$log"
  echo "$log: exit $rc after $(( SECONDS - t0 )) s"
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
  programs=(bench_cuda bench_controller_host bench_record_host inference_engine_cuda_test
            inference_engine_cuda_dtype_test kvscope)
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
  [[ -f $cache/$smollm ]] && md5sum < "$cache/$smollm" | cut -d' ' -f1 > "$bundle/smollm.md5"
  rm -f "$bundle.tar.xz"
  XZ_OPT=-T0 tar -cJf "$bundle.tar.xz" -C build-gpu bundle
  # What one call may carry: 64 MiB less the files that travel anyway (tracked and untracked,
  # not ignored) and 1 MiB of slack.
  tree=$(git ls-files -z --cached --others --exclude-standard | xargs -0 stat -c %s 2>/dev/null | awk '{s += $1} END {print s + 0}')
  room=$(( (64 << 20) - tree - (1 << 20) ))
  first=$(( room - $(stat -c %s "$bundle.tar.xz") ))
  (( first > 0 )) || { echo "gpu-bundle.sh: the bundle ($(du -h "$bundle.tar.xz" | cut -f1)) and the working tree ($(( tree >> 20 )) MiB) do not fit one call" >&2; exit 1; }
  if [[ -f $cache/$smollm ]]; then
    # Part 00 travels beside the bundle, each later one alone.
    head -c "$first" "$cache/$smollm" > build-gpu/smollm.part-00
    tail -c +$(( first + 1 )) "$cache/$smollm" | split -b "$room" -d -a 2 --numeric-suffixes=1 - build-gpu/smollm.part-
  fi
  du -h "$bundle.tar.xz" build-gpu/smollm.part-* 2>/dev/null || true
  echo "working tree $(( tree >> 20 )) MiB; carry build-gpu/bundle.tar.xz and build-gpu/smollm.part-00: scripts/gpu-bundle.sh check;"
  echo "then each further part alone: scripts/gpu-bundle.sh smollm (docs/gpu.md)"
  ;;
test)
  use_bundle
  status=0
  for p in "$bundle"/bin/*_test; do
    echo "== $(basename "$p")"
    "$p" --gtest_brief=1 || status=1
  done
  echo "== kvscope record stories260K, --device cpu and cuda"
  m=$bundle/shared/models/stories260K
  record_both stories260K --model "$m/stories260K.bin" --tokenizer "$m/tok512.bin" --prompt "Once upon a time" \
    --steps 60 || status=1
  "$bundle/bin/kvscope" info /tmp/kvscope-stories260K-auto.h5 || status=1
  exit $status
  ;;
check)
  budget=${2:-560}
  use_bundle
  mkdir -p "$out"
  { nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv \
      || echo "nvidia-smi: not available"; } 2>&1 | tee "$out/gpu.txt"
  # Most important first. A 32K prefill of the 8B shape takes ~25 s and runs three times a dtype,
  # so bf16 is timed at the shorter contexts only.
  capped 120 tests.log bash scripts/gpu-bundle.sh test
  # The host's side of a live policy's step on this machine's cores (no GPU used; ~10 s).
  capped 30 host.log "$bundle/bin/bench_controller_host" --contexts 8192,32768 --steps 16
  # What fp32 storage, auto's choice for models up to 268M weights, costs on SmolLM2-135M's shape.
  capped 40 bench-135m.log "$bundle/bin/bench_cuda" --shape 135m --contexts 1024,4096 --steps 32 --capture none \
    --gpu-dtype fp16,fp32
  capped 200 bench.log "$bundle/bin/bench_cuda" --shape 8b --ops --contexts 1024,4096,32768,8192 --steps 16 \
    --capture both --overlap both
  capped 100 hf.log python3 scripts/bench-hf-eager.py --shape 8b --contexts 1024,4096,8192 --steps 16
  capped 90 bench-bf16.log "$bundle/bin/bench_cuda" --shape 8b --contexts 1024,4096 --steps 16 --capture none \
    --gpu-dtype bf16 --policy h2o --policy streamingllm --policy omnikv
  # The host's side of a recorded step: rows into a trace on this machine's disk, the analyses
  # beside them (no GPU used; ~2 GB written at 32K).
  capped 40 host-record.log "$bundle/bin/bench_record_host" --contexts 4096,32768 --steps 8
  {
    echo; echo "==== summary (full logs in \$OUT)"
    grep -hE '^== |PASSED|FAILED|same text|texts differ|^tokens|^engine|rows: largest|sums / prompt|window rows|Error|stopped at|skipped' \
      "$out/tests.log" || true
    grep -hE '^host time|^\| [0-9]|stopped at|skipped|bench_controller_host:' "$out/host.log" || true
    grep -hE '^## |^\| [0-9]|nothing measured|stopped at|skipped|bench_cuda:' "$out/bench-135m.log" || true
    grep -hE '^GPU|^## |^\||context [0-9]+:|nothing measured|stopped at|skipped|bench_cuda:' "$out/bench.log" || true
    grep -hE '^GPU|^model|^\||OOM|nothing measured|stopped at|skipped|Error' "$out/hf.log" || true
    grep -hE '^## |^\| [0-9]|nothing measured|stopped at|skipped|bench_cuda:' "$out/bench-bf16.log" || true
    grep -hE '^host time|^\| [0-9]|stopped at|skipped|bench_record_host:' "$out/host-record.log" || true
  } | tee "$out/summary.txt"
  ;;
profile)
  budget=${2:-130}
  use_bundle
  mkdir -p "$out"
  ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda*/bin/ncu 2>/dev/null | head -1 || true)
  if [[ -z $ncu ]]; then
    echo "gpu-bundle.sh: ncu not found; nothing profiled"
    exit 0
  fi
  # One launch of each decode kernel (the first timed one of bench_cuda --ops; attention at 32K
  # keys) on the 8B shape: throughput against the chip's peaks, occupancy, where warps stall.
  for k in matvec_kernel decode_split_kernel decode_combine_kernel; do
    capped 40 ncu.txt "$ncu" --clock-control none -k "regex:$k" --launch-skip 3 --launch-count 1 \
      --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \
      --section WarpStateStats "$bundle/bin/bench_cuda" --shape 8b --only-ops --contexts 32768
  done
  echo; echo "==== summary (full report in \$OUT/ncu.txt)"
  grep -E '^  [A-Za-z_:<>]+.*\(|Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per Thread|Waves Per SM|Stall|stopped at|skipped|rror' \
    "$out/ncu.txt" | tee "$out/ncu-summary.txt" || true
  ;;
smollm)
  use_bundle
  if [[ -z ${KVSCOPE_CACHE:-} ]]; then
    echo "SmolLM2: $(ls build-gpu/stash 2>/dev/null | wc -l) parts here so far; carry the next one"
    exit 0
  fi
  status=0
  "$bundle/bin/inference_engine_cuda_test" --gtest_brief=1 --gtest_filter='*SmolLM2*' || status=1
  record_both smollm2 --model "$KVSCOPE_CACHE/$smollm" --chat --prompt "Tell me a short story about a robot." \
    --steps 40 || status=1
  echo "== bf16 storage (the CPU's fp32 trace against it; reported, not a target)"
  "$bundle/bin/kvscope" record --model "$KVSCOPE_CACHE/$smollm" --chat --prompt "Tell me a short story about a robot." \
    --steps 40 --device cuda --gpu-dtype bf16 --out /tmp/kvscope-smollm2-bf16.h5 >/tmp/kvscope-smollm2-bf16.txt || status=1
  python3 tests/python/compare_traces.py /tmp/kvscope-smollm2-cpu.h5 /tmp/kvscope-smollm2-bf16.h5 || true
  exit $status
  ;;
bench)
  shift
  use_bundle
  exec "$bundle/bin/bench_cuda" "$@"
  ;;
*)
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit 2
  ;;
esac
