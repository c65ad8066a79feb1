#!/usr/bin/env bash
# Optional cross-check of KVScope's fixed chat formats against real chat templates (not part of
# scripts/test.sh): scripts/check_chat_templates.py renders each of llama.cpp's collection of real
# models' Jinja chat templates (models/templates in the llama-cpp-python 0.3.36 sdist, the package
# scripts/check-tokenizers.sh also reads) with jinja2 as transformers' apply_chat_template does,
# for one user message and the generation prompt, and compares the text with what
# `kvscope tokenize --chat` writes for a tokenizer carrying that template. One line per template:
# PASS (the same text; a BOS the template writes is written), NONE (KVScope writes no fixed format
# for it: --chat refuses it) or FAIL (KVScope writes a format the template does not), then a
# summary; exit status 1 when any FAILs. About 20 s on 2 cores after the first run.
#   scripts/check-chat-templates.sh [NAME...]    (default: every template; NAME: part of its file name)
# Builds nothing: it needs build/kvscope (or $KVSCOPE) and ../shared/models/stories260K-hf (its
# tokenizer carries the templates). Downloads, once, only from PyPI with pip: the sdist (77 MB) into
# ${KVSCOPE_TOKENIZER_PACKAGES:-$HOME/.cache/kvscope/tokenizer-packages} and jinja2 into a venv at
# ${KVSCOPE_TEMPLATES_VENV:-$HOME/.cache/kvscope/templates-venv}, or $KVSCOPE_TEMPLATES_PYTHON when
# set (a python with jinja2).
set -euo pipefail
cd "$(dirname "$0")/.."
die() { echo "check-chat-templates: $*" >&2; exit 2; }

kvscope=${KVSCOPE:-./build/kvscope}
[ -x "$kvscope" ] || die "no kvscope binary at $kvscope (build it first: scripts/build.sh, or set KVSCOPE)"
kvscope=$(realpath "$kvscope")
tokenizer=../shared/models/stories260K-hf/tokenizer.json
[ -f "$tokenizer" ] || die "no tokenizer at $tokenizer (the stories260K-hf checkpoint beside the checkout)"
packages=${KVSCOPE_TOKENIZER_PACKAGES:-$HOME/.cache/kvscope/tokenizer-packages}

if [ -n "${KVSCOPE_TEMPLATES_PYTHON:-}" ]; then
  py=$KVSCOPE_TEMPLATES_PYTHON
  [ -x "$py" ] || die "KVSCOPE_TEMPLATES_PYTHON=$py is not an executable"
else
  venv=${KVSCOPE_TEMPLATES_VENV:-$HOME/.cache/kvscope/templates-venv}
  py=$venv/bin/python
  if ! [ -x "$py" ] || ! "$py" -c "import jinja2" 2>/dev/null; then
    echo "check-chat-templates: installing jinja2 into $venv (once)" >&2
    [ -x "$py" ] || python3 -m venv "$venv" || die "could not create a venv at $venv (python3-venv missing?)"
    "$py" -m pip install --quiet --disable-pip-version-check jinja2 >&2 || die "pip install into $venv failed"
  fi
fi
"$py" -c "import jinja2" 2>/dev/null || die "$py lacks jinja2"

exec "$py" scripts/check_chat_templates.py --kvscope "$kvscope" --packages "$packages" --tokenizer "$tokenizer" "$@"
