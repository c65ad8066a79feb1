#!/usr/bin/env bash
# Optional cross-check of KVScope's Hugging Face loading and forward pass against HF transformers
# (not part of scripts/test.sh): scripts/check_transformers.py writes tiny random Llama / Qwen2 /
# Qwen3 / Gemma 2 / Gemma 3 / Mistral checkpoints, records each with `kvscope record --device cpu` and compares the greedy
# tokens, the decode attention rows, decode_lse and the prefill window with transformers' float64
# eager attention; also ../shared/models/stories260K-hf. Variant smollm2: KVScope's default model,
# SmolLM2-135M-Instruct.Q4_1.gguf, against transformers loading the same GGUF file: the prompt
# tokens of six prompts and of two --chat prompts (ids and chat template), then a --chat trace of
# assets/prompts/sink.txt as above; skipped (SKIP, not a failure) when the model is not where
# scripts/fetch-model.sh puts it, ${KVSCOPE_CACHE:-$HOME/.cache/kvscope/models} (this script
# downloads no model). One line per variant, then a summary. Then (variant live-eviction)
# scripts/check_live_eviction.py checks KVScope's live eviction: `kvscope rerun` of a stories260K-hf
# trace with full, streamingllm, h2o and snapkv:window=4 at budget 16, --mode forced and free,
# replayed in transformers with each run's kept sets as attention masks (rows, lse, the free runs'
# tokens, top1_agree, kl, ref_logprob; and a negative control that must fail). One line per run,
# then a summary. Then (variant export) scripts/check_export.py checks scripts/hf_record.py, the
# exporter for models KVScope cannot run: its traces of stories260K-hf and of random Llama / Qwen2 / Qwen3 / Gemma /
# Mistral checkpoints against `kvscope record --device cpu` of the same prompts (tokens, rows, lse,
# prefill evidence, and `kvscope simulate`'s runs on both), its rows of four architectures KVScope
# does not run against transformers' eager attention, and its refusals of bad input. One line per
# case, then a summary. Exit status 1 when anything disagrees. About 15 s on 2 idle cores, plus
# 40-50 s for smollm2, about 10 s for live-eviction and about 130 s for export (plus the first
# install).
#   scripts/check-transformers.sh [VARIANT...]      (default: all variants, live-eviction and export)
# Builds nothing: it needs build/kvscope (or $KVSCOPE) and ../shared/models/stories260K-hf.
# Python: $KVSCOPE_TRANSFORMERS_PYTHON when set (a python with torch, transformers >= 5,
# safetensors, numpy, h5py, gguf and accelerate, the last two for transformers' GGUF loader);
# otherwise a venv it creates once at ${KVSCOPE_TRANSFORMERS_VENV:-$HOME/.cache/kvscope/transformers-venv}
# with `pip install torch 'transformers>=5' safetensors numpy h5py gguf accelerate` from PyPI: a
# download of several GB (torch with its CUDA libraries), network needed the first time only.
set -euo pipefail
cd "$(dirname "$0")/.."
die() { echo "check-transformers: $*" >&2; exit 2; }

kvscope=${KVSCOPE:-./build/kvscope}
[ -x "$kvscope" ] || die "no kvscope binary at $kvscope (build it first: scripts/build.sh, or set KVSCOPE)"
kvscope=$(realpath "$kvscope")
stories=../shared/models/stories260K-hf
[ -f "$stories/config.json" ] || die "no model at $stories (the stories260K-hf checkpoint beside the checkout)"
smollm2=${KVSCOPE_CACHE:-$HOME/.cache/kvscope/models}/SmolLM2-135M-Instruct.Q4_1.gguf  # as scripts/fetch-model.sh

modules="import torch, transformers, safetensors, numpy, h5py, gguf, accelerate"
if [ -n "${KVSCOPE_TRANSFORMERS_PYTHON:-}" ]; then
  py=$KVSCOPE_TRANSFORMERS_PYTHON
  [ -x "$py" ] || die "KVSCOPE_TRANSFORMERS_PYTHON=$py is not an executable"
else
  venv=${KVSCOPE_TRANSFORMERS_VENV:-$HOME/.cache/kvscope/transformers-venv}
  py=$venv/bin/python
  if ! [ -x "$py" ] || ! "$py" -c "$modules" 2>/dev/null; then
    echo "check-transformers: installing torch, transformers, safetensors, numpy, h5py, gguf, accelerate" \
      "into $venv (several GB, once)" >&2
    [ -x "$py" ] || python3 -m venv "$venv" || die "could not create a venv at $venv (python3-venv missing?)"
    "$py" -m pip install --quiet --disable-pip-version-check torch 'transformers>=5' safetensors numpy h5py \
      gguf accelerate >&2 \
      || die "pip install into $venv failed"
  fi
fi
"$py" -c "$modules" 2>/dev/null || die "$py lacks one of ${modules#import }"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
variants=() live=$(($# == 0)) export=$(($# == 0))
for v in "$@"; do
  case $v in
    live-eviction) live=1 ;;
    export) export=1 ;;
    *) variants+=("$v") ;;
  esac
done
rc=0
if [ $# -eq 0 ] || [ ${#variants[@]} -gt 0 ]; then
  "$py" scripts/check_transformers.py --kvscope "$kvscope" --stories "$stories" --smollm2 "$smollm2" --work "$work" \
    "${variants[@]}" || rc=$?
fi
if [ $live = 1 ]; then
  mkdir "$work/live"
  "$py" scripts/check_live_eviction.py --kvscope "$kvscope" --stories "$stories" --work "$work/live" || rc=$?
fi
if [ $export = 1 ]; then
  mkdir "$work/export"
  "$py" scripts/check_export.py --kvscope "$kvscope" --stories "$stories" --work "$work/export" || rc=$?
fi
exit $rc
