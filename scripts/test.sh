#!/usr/bin/env bash
# The test command: installs what is missing, builds (Release), runs every test suite, then the
# unit tests under ASan + UBSan (scripts/test-sanitize.sh) and a short run of every fuzz target
# (scripts/fuzz.sh, 20 s each). Ends with one summary line.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh || exit 1
bash scripts/build.sh || { echo "test: FAILED (build)"; exit 1; }
jobs=$(nproc 2>/dev/null || echo 2)
t0=$(date +%s)
(cd build && ctest --output-on-failure -j"$jobs" --timeout 600) && unit=passed || unit=FAILED
t1=$(date +%s)
bash scripts/test-sanitize.sh && sanitize=clean || sanitize=FAILED
t2=$(date +%s)
bash scripts/fuzz.sh "${KVSCOPE_FUZZ_SECONDS:-20}" && fuzz=clean || fuzz=FAILED
t3=$(date +%s)
echo "test: ctest $unit ($((t1 - t0)) s), sanitizers $sanitize ($((t2 - t1)) s), fuzz $fuzz ($((t3 - t2)) s)"
[ "$unit" = passed ] && [ "$sanitize" = clean ] && [ "$fuzz" = clean ]
