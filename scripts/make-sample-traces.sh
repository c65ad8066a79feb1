#!/usr/bin/env bash
# Regenerates sample_traces/: small traces recorded by KVScope itself, with every eviction policy
# simulated on them, so the app can be explored with no model present.
set -euo pipefail
cd "$(dirname "$0")/.."
kvscope=${KVSCOPE:-./build/kvscope}
models=../shared/models
out=sample_traces
mkdir -p "$out"

# stories260K (llama2.c checkpoint): the story demo prompt, greedy; the prompt is longer than the
# budget so the prefill-once policies compress it too (their window 8, not 32: a window that
# covers the budget of 32 would leave nothing to choose by score).
$kvscope record --model $models/stories260K/stories260K.bin --tokenizer $models/stories260K/tok512.bin \
  --prompt-file assets/prompts/story.txt --steps 120 --out $out/stories260K-story.h5 --quiet
$kvscope simulate $out/stories260K-story.h5 --budget 32 \
  --policy full --policy window --policy streamingllm --policy streamingllm:sinks=0 --policy strided \
  --policy h2o --policy tova --policy snapkv:window=8 --policy pyramidkv:window=8 --policy adakv:window=8 \
  --policy duoattention \
  --policy omnikv:filters=1 --policy kvzip

# SmolLM2-135M-Instruct (when fetched): the attention-sink demo, short so the file stays small.
smol=$(bash scripts/fetch-model.sh 2>/dev/null || true)
if [ -n "$smol" ] && [ -s "$smol" ]; then
  $kvscope record --model "$smol" --prompt-file assets/prompts/sink.txt --chat --steps 32 \
    --decode-dtype float16 --capture-budget-mb 8 --out $out/smollm2-sink.h5 --quiet
  $kvscope simulate $out/smollm2-sink.h5 --budget 48 \
    --policy full --policy streamingllm --policy streamingllm:sinks=0 --policy h2o --policy tova \
    --policy snapkv --policy pyramidkv --policy adakv --policy duoattention --policy omnikv
fi
ls -la $out
