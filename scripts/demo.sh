#!/usr/bin/env bash
# The main job: installs what is missing, fetches the default model (SmolLM2-135M-Instruct),
# builds, records the attention-sink demo, simulates the eviction policies on it and opens the
# app. Without a display it renders the main view to a PNG under Xvfb and says where.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
model=$(bash scripts/fetch-model.sh)
bash scripts/build.sh
out="${KVSCOPE_OUT:-out}"
mkdir -p "$out"
trace="$out/demo-sink.h5"
./build/kvscope record --model "$model" --prompt-file assets/prompts/sink.txt --chat \
  --steps 48 --out "$trace"
./build/kvscope simulate "$trace" --budget 64 \
  --policy streamingllm --policy streamingllm:sinks=0 --policy h2o --policy tova --policy snapkv
if [ -n "${DISPLAY:-}" ]; then
  exec ./build/kvscope gui "$trace"
fi
png="$out/demo-sink.png"
# The app's own exit status decides, not xvfb-run's (a hiccup in its clean-up of /tmp returns 5).
rm -f "$png" "$out/.gui-status"
xvfb-run -a -s "-screen 0 1600x1000x24" sh -c \
  './build/kvscope gui "$1" --screenshot "$2" --size 1600x1000; echo $? > "$3"' _ "$trace" "$png" "$out/.gui-status" || true
status=$(cat "$out/.gui-status" 2>/dev/null || echo "none (Xvfb did not start)")
rm -f "$out/.gui-status"
if [ "$status" != 0 ]; then
  echo "kvscope: rendering the main view failed (exit status $status)" >&2
  exit 1
fi
echo "kvscope: no display here; rendered the main view of $trace to $png"
