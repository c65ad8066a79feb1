#!/usr/bin/env bash
# Configures the sanitizer build (default build-asan/, or $KVSCOPE_ASAN_BUILD) that
# scripts/test-sanitize.sh and scripts/fuzz.sh share: ASan + UBSan, -O1 -g, no GUI or benchmarks;
# with clang (the libFuzzer targets too) when installed, gcc otherwise. Ninja, because the
# Makefile generator builds the targets named on one command line one after the other, each a
# test's single source and link: one core busy out of two for ten minutes. Idempotent; a folder
# configured otherwise (another generator, or without the fuzz targets clang now allows) is
# configured afresh.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${KVSCOPE_ASAN_BUILD:-build-asan}
cxx=$(command -v clang++-14 || command -v clang++ || true)
cc=$(command -v clang-14 || command -v clang || true)
fuzz=OFF
[ -n "$cxx" ] && fuzz=ON
cache="$build/CMakeCache.txt"
if [ -f "$cache" ] && grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' "$cache" && grep -q "^KVSCOPE_FUZZ:BOOL=$fuzz$" "$cache"; then
  cmake "$build" >/dev/null  # picks up test files added since it was configured
  exit 0
fi
rm -rf "$build"
flags=(-G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g"
       "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g" -DKVSCOPE_SANITIZE=ON -DKVSCOPE_FUZZ=$fuzz -DKVSCOPE_GUI=OFF
       -DKVSCOPE_BENCH=OFF)
if [ -n "$cxx" ]; then
  CC=$cc CXX=$cxx cmake -S . -B "$build" "${flags[@]}" >/dev/null
else
  cmake -S . -B "$build" "${flags[@]}" >/dev/null
fi
