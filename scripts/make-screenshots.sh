#!/usr/bin/env bash
# Regenerates docs/screenshots/: SmolLM2-135M-Instruct records the attention-sink demo prompt (48
# steps), five policies are simulated at budget 64, StreamingLLM with and without sinks re-run
# live at budget 32; then the main view and each view alone are rendered under Xvfb.
set -euo pipefail
cd "$(dirname "$0")/.."
kvscope=$(realpath "${KVSCOPE:-./build/kvscope}")
model=$(bash scripts/fetch-model.sh)
shots=docs/screenshots
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
trace="$work/sink.h5"
$kvscope record --model "$model" --prompt-file assets/prompts/sink.txt --chat --steps 48 --out "$trace" --quiet
$kvscope simulate "$trace" --budget 64 \
  --policy streamingllm --policy streamingllm:sinks=0 --policy h2o --policy tova --policy snapkv
$kvscope rerun "$trace" --budget 32 --mode free --policy streamingllm --policy streamingllm:sinks=0
$kvscope info "$trace"

# The runs Compare shows: the live pair, by their indexes in the trace's run list.
runs=$($kvscope info "$trace" --json | python3 -c '
import json, sys
names = json.load(sys.stdin)["runs"]
print(names.index("streamingllm_sinks0_b32_free"), names.index("streamingllm_b32_free"))')
script="select 14 0;overlay streamingllm_sinks0_b64;runs $runs"
shoot() {  # name, step, extra arguments
  local name=$1 step=$2
  shift 2
  # From inside $work, so that the status bar names sink.h5, not a temporary folder.
  (cd "$work" && xvfb-run -a -s "-screen 0 1600x1000x24" "$kvscope" gui sink.h5 --screenshot "$name.png" \
    --step "$step" --script "$script" "$@")
  mv "$work/$name.png" "$shots/$name.png"
}
mkdir -p "$shots"
shoot overview 40 --size 1600x1000
# Compare at step 12, while the no-sinks run still writes text of its own (it ends before 40).
for shot in attention:40:1000x700 compare:12:1200x640 heads:40:900x760 lanes:40:1400x520 layers:40:1000x560 \
  metrics:40:1200x640; do
  IFS=: read -r name step size <<<"$shot"
  shoot "$name" "$step" --view "$name" --size "$size"
done
ls -la "$shots"
