#!/usr/bin/env bash
# Installs the Debian packages KVScope builds and tests with, and caches the `gguf` wheel (gguf-py)
# that the K-quant cross-check test puts on PYTHONPATH (idempotent: apt runs only when something
# is missing, pip only when the wheel is not cached).
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config libhdf5-dev libdeflate-dev libpcre2-dev libutf8proc-dev libgtest-dev googletest
      libbenchmark-dev libimgui-dev libglfw3-dev libstb-dev libgl-dev xvfb xauth
      python3 python3-h5py python3-numpy python3-yaml python3-pip clang libclang-rt-14-dev
      libomp-dev unzip ccache)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "kvscope setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# gguf-py (pure Python; needs numpy and yaml) for tests/inference/gguf_py_quant_test.cpp, which
# skips without it: downloaded, never installed into the system Python.
wheels="${KVSCOPE_WHEELS:-$HOME/.cache/kvscope/wheels}"
if ! compgen -G "$wheels/gguf-*.whl" >/dev/null; then
  mkdir -p "$wheels"
  /usr/bin/python3 -m pip download --quiet --no-deps --disable-pip-version-check -d "$wheels" \
    gguf==0.19.0 || echo "kvscope setup: no gguf wheel; the K-quant cross-check will skip" >&2
fi
