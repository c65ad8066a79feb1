#!/usr/bin/env bash
# Regenerates docs/screenshots/: SmolLM2-135M-Instruct records the attention-sink demo prompt (48
# steps), five policies are simulated at budget 64, StreamingLLM with and without sinks re-run
# live at budget 32; then the main view and each view alone are rendered under Xvfb.
set -euo pipefail
cd "$(dirname "$0")/.."
kvscope=${KVSCOPE:-./build/kvscope}
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
shoot() {  # name, extra arguments
  local name=$1
  shift
  xvfb-run -a -s "-screen 0 1600x1000x24" $kvscope gui "$trace" --screenshot "$work/$name.png" --step 40 \
    --script "$script" "$@"
  mv "$work/$name.png" "$shots/$name.png"
}
mkdir -p "$shots"
shoot overview --size 1600x1000
for shot in attention:1000x700 compare:1200x640 heads:900x760 lanes:1400x520 layers:1000x560 metrics:1200x640; do
  shoot "${shot%%:*}" --view "${shot%%:*}" --size "${shot#*:}"
done
ls -la "$shots"
