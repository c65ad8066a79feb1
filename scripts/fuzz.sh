#!/usr/bin/env bash
# Runs every libFuzzer target (tests/fuzz/fuzz_*.cpp) for a while: `scripts/fuzz.sh [SECONDS] [TARGET...]`
# (default 20 s each, all targets; one by name: `scripts/fuzz.sh 600 trace_bytes`). Builds them with
# clang + ASan/UBSan into build-asan (shared with scripts/test-sanitize.sh). Corpora: tests/fuzz/corpus/<target>, tests/fuzz/regressions/<target>
# and the test models in ../shared/models, copied into build-asan/fuzz-corpus/<target>.
# A crash, leak, sanitizer report or timeout leaves its input in build-asan/fuzz-artifacts/<target>/.
# Targets run one per core at a time.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
secs=${1:-20}
shift || true
build=${KVSCOPE_ASAN_BUILD:-build-asan}
models="$root/../shared/models"

if ! command -v clang++-14 >/dev/null && ! command -v clang++ >/dev/null; then
  echo "fuzz: SKIPPED (clang++ not installed)"
  exit 0
fi
bash scripts/configure-asan.sh
cmake --build "$build" -j"$(nproc 2>/dev/null || echo 2)" --target fuzz_all >/dev/null

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for f in tests/fuzz/fuzz_*.cpp; do
    t=$(basename "$f" .cpp)
    targets+=("${t#fuzz_}")
  done
fi

# Seeds too big to keep in the repository come from the shared test models at run time.
seed_models() {
  local t=$1 dir=$2
  case $t in
    llama2c_model) cp "$models/stories260K/stories260K.bin" "$dir/" ;;
    llama2c_tokenizer) cp "$models/stories260K/tok512.bin" "$dir/" ;;
    sentencepiece_model) cp "$models/stories260K/tok512.model" "$dir/" ;;
    gguf) cp "$models/stories260K/stories260K.gguf" "$models/fixtures/llama-2-tiny-random.gguf" "$dir/" ;;
    safetensors) cp "$models/stories260K-hf/model.safetensors" "$dir/" ;;
    hf_folder) { cat "$models/stories260K-hf/config.json"; printf '\0'; cat "$models/stories260K-hf/model.safetensors"; } >"$dir/stories260K-hf" ;;
    tokenizer_json) cp "$models/stories260K-hf/tokenizer.json" "$dir/" ;;
    json) for f in config.json tokenizer.json tokenizer_config.json; do cp "$models/stories260K-hf/$f" "$dir/$f"; done ;;
    trace_bytes) for f in sample_traces/*.h5; do [ -f "$f" ] && cp "$f" "$dir/"; done ;;
  esac
}

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$(pwd)/tests/fuzz/lsan.supp}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# One target: seeds its corpus, fuzzes it, prints its summary line (ok or FAILED, with the
# sanitizer's report lines when it failed).
run_target() {
  local t=$1 bin="$build/fuzz_$1" corpus="$build/fuzz-corpus/$1" artifacts="$build/fuzz-artifacts/$1/"
  mkdir -p "$corpus" "$artifacts"
  for d in "tests/fuzz/corpus/$t" "tests/fuzz/regressions/$t"; do
    if [ -d "$d" ] && [ -n "$(ls -A "$d")" ]; then cp "$d"/* "$corpus/"; fi
  done
  [ -d "$models" ] && seed_models "$t" "$corpus" 2>/dev/null || true
  local log="$build/fuzz-$t.log" start rc pid status runs
  start=$(date +%s)
  # A corrupt trace can keep libhdf5 busy in the forked metadata probe until the probe's time
  # limit (60 s by default), which ends as a one-line error, not a hang: here the limit is 5 s,
  # well inside libFuzzer's -timeout.
  KVSCOPE_PROBE_TIMEOUT_S=5 nice -n 10 "$bin" "$corpus" -max_total_time="$secs" -timeout=30 -rss_limit_mb=2560 -malloc_limit_mb=2048 \
    -artifact_prefix="$artifacts" -print_final_stats=1 >"$log" 2>&1 &
  pid=$!
  wait $pid && rc=0 || rc=$?
  # The target's scratch folder (tests/fuzz/fuzz_entries.h); libFuzzer's exits skip its cleanup.
  rm -rf "/dev/shm/kvscope-fuzz-$pid" "${TMPDIR:-/tmp}/kvscope-fuzz-$pid"
  status=ok
  if [ $rc -ne 0 ]; then
    status=FAILED
    grep -E "ERROR|SUMMARY|Test unit written|==[0-9]+==" "$log" | head -20 || true
  fi
  runs=$(grep -o "stat::number_of_executed_units: *[0-9]*" "$log" | grep -o "[0-9]*$" || echo "?")
  printf "fuzz %-18s %-6s %8s inputs in %3d s\n" "$t" "$status" "$runs" "$(( $(date +%s) - start ))"
}

# One target per core at a time (each fuzzer is single-threaded); lines printed in target order.
parallel=$(nproc 2>/dev/null || echo 2)
for t in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$parallel" ]; do wait -n || true; done
  run_target "$t" >"$build/fuzz-$t.summary" 2>&1 &
done
wait
failed=()
for t in "${targets[@]}"; do
  cat "$build/fuzz-$t.summary"
  grep -q "^fuzz .* FAILED " "$build/fuzz-$t.summary" && failed+=("$t")
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: FAILED targets: ${failed[*]} (inputs in $build/fuzz-artifacts/, logs in $build/fuzz-<target>.log)"
  exit 1
fi
echo "fuzz: all ${#targets[@]} targets clean (${secs} s each)"
