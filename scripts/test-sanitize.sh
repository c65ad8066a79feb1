#!/usr/bin/env bash
# Builds the unit tests with AddressSanitizer + UndefinedBehaviorSanitizer (LeakSanitizer on) into
# build-asan (scripts/configure-asan.sh) and runs them, the CUDA path's tests on the CPU emulation
# of CUDA included; then the decode team's and the trace file driver's tests under ThreadSanitizer
# (with clang).
# `scripts/test-sanitize.sh all` runs every suite instead of the default selection.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${KVSCOPE_ASAN_BUILD:-build-asan}
jobs=$(nproc 2>/dev/null || echo 2)
start=$(date +%s)

# The default selection: parsers, loaders, tokenizers, traces, policies, simulator, engine and
# kernels (the suites that read untrusted bytes or index buffers). Left out as too slow under ASan
# or not about memory safety: the GUI suites (need Xvfb), the process-level reliability tests
# (kill/disk-full: they time real runs), the story-generation and h5py suites.
select='^(kernels_.*|inference_(loader|gguf|quant|hf|tokenizer|huge_pages|host_memory|engine_kv_store|engine_attention|engine_controller|engine_snapshot|decode_team|generate_sampler).*|analysis_(trace|h5_direct_driver|atomic_file|file_lock|policy|simulator_semantics|recorder|retrieval|similarity_matrix|metrics|kvzip|filter_layers|alpha).*|reliability_fuzz_regressions.*)_test$'
[ "${1:-}" = "all" ] && select='.*_test$'

bash scripts/configure-asan.sh
cxx=$(command -v clang++-14 || command -v clang++ || true)
targets=()
for src in tests/*/*_test.cpp; do
  name="$(basename "$(dirname "$src")")_$(basename "$src" .cpp)"
  [[ $name == kernels_cuda_* ]] && continue  # device twins: CUDA builds only (this one has none)
  [[ $name =~ $select ]] && targets+=("$name")
done
# The GPU path on the CPU emulation of CUDA: ASan sees every "device" buffer, as memcheck would.
for src in tests/kernels/cuda_*_test.cpp tests/inference/engine_cuda*_test.cpp tests/cuda_emu/*_test.cpp; do
  targets+=("emu_$(basename "$src" .cpp)")
done
cmake --build "$build" -j"$jobs" --target "${targets[@]}" >"$build/sanitize-build.log" 2>&1 ||
  { tail -40 "$build/sanitize-build.log"; echo "sanitize: BUILD FAILED"; exit 1; }
built=$(date +%s)

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$(pwd)/tests/fuzz/lsan.supp}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
# Each test program runs directly (ctest names tests by GoogleTest case, not by program); $jobs at a time.
mkdir -p "$build/sanitize-logs"
rm -f "$build/sanitize-logs/"*.log
# The emulated engine test is the longest (every kernel's threads as fibers): it runs first, in
# two halves, so both cores share it. Entries PROGRAM@HALF select the
# half by test name; everything not in half A is in half B, so no test is left out.
runs=(emu_engine_cuda_test@A emu_engine_cuda_test@B)
for t in "${targets[@]}"; do [ "$t" = emu_engine_cuda_test ] || runs+=("$t"); done
printf '%s\n' "${runs[@]}" | xargs -P "$jobs" -I{} sh -c \
  's=$(date +%s); f=
   case "$2" in
     *@A) f="--gtest_filter=*Stories260K*:*DeviceReductions*" ;;
     *@B) f="--gtest_filter=-*Stories260K*:*DeviceReductions*:*SmolLM2*" ;;  # SmolLM2: minutes under ASan
   esac
   if timeout 600 "$1/${2%@*}" --gtest_brief=1 ${f:+"$f"} >"$1/sanitize-logs/$2.log" 2>&1; then r=ok; else r=FAILED; fi
   echo "  $r $2 ($(($(date +%s) - s)) s)"' \
  _ "$build" {} | tee "$build/sanitize-test.log"
rc=0
grep -q FAILED "$build/sanitize-test.log" && rc=1
end=$(date +%s)
echo "sanitize: ${#targets[@]} test programs; build $((built - start)) s, run $((end - built)) s; logs in $build/sanitize-logs/"
if [ $rc -ne 0 ]; then echo "sanitize: FAILED"; exit 1; fi
echo "sanitize: clean (ASan + UBSan + LSan)"

# ThreadSanitizer on the decode team: its threads are plain std::threads synchronised by atomics
# only (no OpenMP, which TSan cannot see into), so TSan checks every happens-before it relies on.
if [ -n "$cxx" ]; then
  "$cxx" -std=c++20 -O1 -g -fsanitize=thread -I. tests/inference/decode_team_test.cpp \
    inference/decode_team.cpp -lgtest -lgtest_main -lpthread -o "$build/decode_team_tsan"
  TSAN_OPTIONS=halt_on_error=1 "$build/decode_team_tsan" --gtest_brief=1 >"$build/sanitize-logs/decode_team_tsan.log" 2>&1 ||
    { tail -40 "$build/sanitize-logs/decode_team_tsan.log"; echo "sanitize: TSan FAILED"; exit 1; }
  echo "sanitize: clean (TSan, decode team)"
  # The trace file driver's writing thread, synchronised with HDF5's calls by a mutex.
  # shellcheck disable=SC2046  # pkg-config's flags are words
  "$cxx" -std=c++20 -O1 -g -fsanitize=thread -I. tests/analysis/h5_direct_driver_test.cpp analysis/h5_direct_driver.cpp \
    analysis/h5_util.cpp $(pkg-config --cflags --libs hdf5) -lgtest -lgtest_main -lpthread -o "$build/h5_direct_driver_tsan"
  TSAN_OPTIONS=halt_on_error=1 "$build/h5_direct_driver_tsan" --gtest_brief=1 >"$build/sanitize-logs/h5_direct_driver_tsan.log" 2>&1 ||
    { tail -40 "$build/sanitize-logs/h5_direct_driver_tsan.log"; echo "sanitize: TSan FAILED"; exit 1; }
  echo "sanitize: clean (TSan, trace file driver)"
fi
