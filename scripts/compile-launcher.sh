#!/usr/bin/env bash
# CMake's compiler launcher when ccache is installed (CMakeLists.txt, KVSCOPE_CCACHE):
#   compile-launcher.sh SOURCE_DIR COMPILER ARGS...
# Compiles through ccache, paths under the checkout hashed relative to it and the build folder not
# hashed, so that a clean checkout (CI) or a second clone takes each unchanged object from
# ~/.cache/ccache. A precompiled header is made by the compiler itself, never taken from the cache
# (clang's holds the absolute paths it was made from), and gets beside it a checksum of what it was
# made from (<header>.sum: the header preprocessed and the flags, the checkout's path left out),
# which ccache hashes for the sources that include it instead of the header's own bytes: those
# differ from build to build (GCC's and clang's hold pointers and paths) and would make every test
# a cache miss (ccache's pch_external_checksum).
set -euo pipefail
root=$1
shift
export CCACHE_BASEDIR=$root CCACHE_NOHASHDIR=1 CCACHE_PCH_EXTSUM=1
export CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime

# ccache makes the checkout's paths relative itself, but not those passed through -Xclang (clang's
# precompiled header is included so). `out`: the output file.
args=()
prev=""
out=""
for a in "$@"; do
  if [ "$prev" = -Xclang ] && [[ $a == "$root"/* ]]; then
    a=$(realpath -m --relative-to=. "$a")
  fi
  [ "$prev" = -o ] && out=$a
  args+=("$a")
  prev=$a
done
case $out in
  *.gch | *.pch) ;;
  *) exec ccache "${args[@]}" ;;
esac

"${args[@]}"
# The same command preprocessing only (no line markers, so no paths), written to stdout.
pre=()
skip=0
for ((i = 0; i < ${#args[@]}; i++)); do
  a=${args[i]}
  if ((skip)); then skip=0; continue; fi
  case $a in
    -o) skip=1; continue ;;
    -c) continue ;;
    -Xclang)
      if [ "${args[i + 1]:-}" = -emit-pch ]; then skip=1; continue; fi ;;
  esac
  pre+=("$a")
done
{
  printf '%s\n' "${args[@]}" | sed "s|$root|.|g"
  "${pre[@]}" -E -P -o -
} | sha256sum >"$out.sum.tmp"
mv "$out.sum.tmp" "$out.sum"
