#!/usr/bin/env bash
# Installs the Debian packages KVScope builds and tests with (idempotent: apt runs only when
# something is missing).
set -euo pipefail
pkgs=(build-essential cmake pkg-config libhdf5-dev libpcre2-dev libgtest-dev googletest
      libbenchmark-dev libimgui-dev libglfw3-dev libstb-dev libgl-dev xvfb xauth
      python3 python3-h5py python3-numpy python3-pip clang libclang-rt-14-dev libomp-dev unzip)
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
