#!/usr/bin/env python3
"""Cross-check of KVScope's Hugging Face loader and CPU forward pass against HF transformers.

Writes tiny random Llama / Qwen2 / Qwen3 / Phi-3 / Gemma 2 / Gemma 3 / Mistral checkpoints (its own
safetensors writer: F32, F16, BF16, sharded; and a Gemma 3 with a vision tower that transformers saves),
records each with `kvscope record --device cpu`, and compares the trace with transformers' eager attention in
float64 (output_attentions=True): the greedy tokens (teacher-forced argmax and HF's greedy generate), every
decode attention row, decode_lse and the prefill_window rows. Also the real checkpoint stories260K-hf, and
(variant smollm2) KVScope's default model, the GGUF file SmolLM2-135M-Instruct.Q4_1.gguf, against transformers
loading the same file (dequantized; needs the packages gguf and accelerate): the prompt tokens of a few
prompts and of --chat against the GGUF-built tokenizer and its chat template, then a --chat trace as above
(teacher-forced argmax, HF's greedy generate, decode rows, decode_lse, prefill window). smollm2 is skipped
when the model file is absent. One line per variant, then a summary; exit status 1 when any variant disagrees.
Run it through scripts/check-transformers.sh.

usage: check_transformers.py --kvscope BIN --stories DIR --smollm2 GGUF --work DIR [VARIANT...]
"""
import argparse
import importlib
import json
import os
import shutil
import struct
import subprocess
import sys

os.environ.setdefault("TQDM_DISABLE", "1")  # before tqdm's import: transformers' GGUF loader draws a progress bar
import h5py
import numpy as np
import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

PROMPT = "Once upon a time, there was a little girl named Lily. She loved to play"
STEPS = 40
STORIES_PROMPT, STORIES_STEPS = "Once upon a time", 120
# KVScope computes in float32, the reference in float64. On stories260K-hf the differences are
# <= 3e-6 (attention) and <= 3e-5 (lse); a wrong RoPE theta gives ~1 and ~7.
ATTN_TOL = 1e-5  # absolute, attention probabilities (decode rows, prefill window)
F16_TOL = 5e-4   # the same, stored as float16 (--decode-dtype float16): one float16 step near 1
LSE_TOL = 1e-4   # relative to max(1, |lse|)
# smollm2: prompts for the tokenizer, without digits (transformers' GGUF-built tokenizer lacks
# SmolLM2's digit-splitting pre-tokenizer, which KVScope has, as llama.cpp's 'smollm' has), then
# the forward check on sink.txt with --chat. KVScope's float32 rows are within 7e-6 there.
SMOL_PROMPTS = ["The quick brown fox jumps over the lazy dog.",
                "Line one.\nLine two.\n\n\nLine five.\r\n\tTabbed",
                "café naïve Ünïcödé 日本語 🙂 👍🏽",
                "   three leading spaces, two trailing  ",
                "def square(x):\n    return x * x  # power\n\nfor i in range(n):\n    print(square(i))",
                "a <|im_end|> b <|endoftext|>"]
SMOL_CHAT = "Write a haiku.\nAbout snow, café 🙂"
SMOL_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "assets", "prompts", "sink.txt")
SMOL_STEPS = 32

LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 64}
# name -> write_checkpoint() arguments. The prompt is 21 tokens, so 61 positions in all: longer
# than the sliding windows (16, 12), which HF applies through its attention mask.
DEFAULT = object()  # a config.json key left out, for the config class's default
# OLMo 2 Instruct's chat template as tokenizer_config.json of allenai/OLMo-2-1124-7B-SFT holds it (newlines as
# Jinja's escape, a backslash and n, as in R1's below)
TULU = ("{{ bos_token }}{% for message in messages %}{% if message['role'] == 'system' %}{{ '<|system|>\\n' + "
        "message['content'] + '\\n' }}{% elif message['role'] == 'user' %}{{ '<|user|>\\n' + message['content'] + "
        "'\\n' }}{% elif message['role'] == 'assistant' %}{% if not loop.last %}{{ '<|assistant|>\\n'  + "
        "message['content'] + eos_token + '\\n' }}{% else %}{{ '<|assistant|>\\n'  + message['content'] + eos_token "
        "}}{% endif %}{% endif %}{% if loop.last and add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"
        "{% endfor %}")
# DeepSeek-R1-Distill-Llama-8B's chat template (abridged: no tool calls), whose generation prompt opens <think>
R1 = ("{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% endif %}{% set ns = "
      "namespace(is_tool=false, system_prompt='') %}{%- for message in messages %}{%- if message['role'] == 'system' "
      "%}{% set ns.system_prompt = message['content'] %}{%- endif %}{%- endfor %}{{bos_token}}{{ns.system_prompt}}"
      "{%- for message in messages %}{%- if message['role'] == 'user' %}{%- set ns.is_tool = false -%}"
      "{{'<｜User｜>' + message['content']}}{%- endif %}{%- if message['role'] == 'assistant' and "
      "message['content'] is not none %}{{'<｜Assistant｜>' + message['content'] + '<｜end▁of▁sentence｜>'}}"
      "{%- endif %}{%- endfor -%}{% if add_generation_prompt and not ns.is_tool %}{{'<｜Assistant｜><think>\\n'}}"
      "{% endif %}")

VARIANTS = {
    "llama_f32_untied": dict(),
    "llama_f32_tied": dict(tied=True, seed=1),
    "llama_f16": dict(dtype="F16", seed=2),
    "llama_bf16": dict(dtype="BF16", seed=30),
    "llama_sharded3": dict(shards=3, seed=4),
    "llama_mha": dict(kv_heads=6, seed=5),
    "llama_attn_bias": dict(bias=True, seed=6),  # q/k/v biases; HF also has o_proj.bias (zero)
    "llama_head_dim32": dict(seed=9, dim=64, heads=4, kv_heads=2, head_dim=32),  # not dim / heads
    "llama_rope_linear": dict(seed=7, extra={"rope_scaling": {"type": "linear", "factor": 4.0}}),
    "llama_rope_llama3": dict(seed=8, extra={"rope_theta": 500000.0, "rope_scaling": LLAMA3}),
    "qwen2_bias_tied": dict(arch="qwen2", bias=True, tied=True, seed=10),
    "qwen2_bias_bf16": dict(arch="qwen2", bias=True, dtype="BF16", seed=11),
    # Qwen2 configs carry a sliding_window that applies only with use_sliding_window
    "qwen2_sw_unused": dict(arch="qwen2", bias=True, seed=12,
                            extra={"sliding_window": 8, "use_sliding_window": False, "max_window_layers": 2}),
    # ... and with use_sliding_window: the window on the layers from max_window_layers on, or on
    # those layer_types names (Qwen3)
    "qwen2_sw_layers": dict(arch="qwen2", bias=True, seed=44, layers=4,
                            extra={"sliding_window": 8, "use_sliding_window": True, "max_window_layers": 2}),
    "qwen3_sw_listed": dict(arch="qwen3", seed=45, dim=64, heads=4, kv_heads=2, head_dim=16,
                            extra={"sliding_window": 8, "use_sliding_window": True,
                                   "layer_types": ["sliding_attention", "full_attention", "sliding_attention"]}),
    # Qwen3: RMSNorm of every q and k head before RoPE (q_norm, k_norm), heads wider than dim / heads
    "qwen3_tied_hd32": dict(arch="qwen3", tied=True, seed=16, dim=64, heads=4, kv_heads=2, head_dim=32,
                            extra={"rope_theta": 1000000.0, "rms_norm_eps": 1e-6}),
    # no head_dim in config.json: 128 (Qwen3Config's default), not hidden_size / heads
    "qwen3_bf16_sw_unused": dict(arch="qwen3", dtype="BF16", seed=17,
                                 extra={"sliding_window": None, "use_sliding_window": False,
                                        "layer_types": ["full_attention"] * 3}),
    # Gemma 3: local layers (a window, their own RoPE base) and global ones, post-block norms, GeGLU,
    # embeddings scaled by sqrt(hidden_size), norms of 1 + weight; query_pre_attn_scalar apart from
    # head_dim, linear scaling of the global layers' RoPE
    "gemma3_pattern2_tied": dict(arch="gemma3", tied=True, seed=18, dim=64, heads=4, kv_heads=1, head_dim=32,
                                 layers=4, extra={"sliding_window": 8, "sliding_window_pattern": 2,
                                                  "query_pre_attn_scalar": 32, "rope_theta": 1000000.0,
                                                  "rope_local_base_freq": 10000.0}),
    "gemma3_layer_types_qpas": dict(arch="gemma3", seed=19, dim=64, heads=4, kv_heads=2, head_dim=16,
                                    extra={"sliding_window": 12, "query_pre_attn_scalar": 24,
                                           "layer_types": ["sliding_attention", "full_attention",
                                                           "sliding_attention"],
                                           "rope_scaling": {"rope_type": "linear", "factor": 4.0}}),
    # Gemma 2: every other layer local (one RoPE base), post-block norms, GeGLU, scaled embeddings,
    # attention scores soft-capped (a cap of 3 changes every row of these weights) and logits; the
    # caps transformers applies where config.json gives none (50, 30)
    "gemma2_caps_tied": dict(arch="gemma2", tied=True, seed=22, dim=64, heads=4, kv_heads=2, head_dim=16, layers=4,
                             extra={"sliding_window": 8, "query_pre_attn_scalar": 24,
                                    "attn_logit_softcapping": 3.0, "final_logit_softcapping": 10.0}),
    "gemma2_default_caps": dict(arch="gemma2", seed=23, dim=64, heads=4, kv_heads=1, head_dim=32,
                                extra={"sliding_window": 12, "query_pre_attn_scalar": 32,
                                       "layer_types": ["full_attention", "sliding_attention", "full_attention"]}),
    # Phi-3: q/k/v in one qkv_proj, gate/up in one gate_up_proj; its sliding_window on every layer
    "phi3_sw16": dict(arch="phi3", seed=25, extra={"sliding_window": 16, "pad_token_id": 0}),
    "phi3_mha_f16": dict(arch="phi3", dtype="F16", kv_heads=6, seed=26, extra={"pad_token_id": 0}),
    # Phi-3's 128K LongRoPE: a factor per frequency, the short ones while a forward pass ends within
    # original_max_position_embeddings (config.json's own, as Phi-3 keeps it), the long ones past it;
    # the attention factor from max_position_embeddings / original. A run within it (61 positions of
    # 64), then a prompt past it. (A run that passes it while decoding has no one reference: HF's
    # generate() then recomputes the whole sequence with the long factors, its forward pass with a
    # cache, as KVScope, rotates only the new tokens with them.)
    "phi3_longrope": dict(arch="phi3", seed=35, extra={
        "pad_token_id": 0, "original_max_position_embeddings": 64,
        "rope_scaling": {"type": "longrope", "short_factor": [1.0, 1.1, 1.3, 1.6, 2.0, 2.5, 3.1, 4.0],
                         "long_factor": [1.0, 1.5, 2.5, 4.0, 6.0, 9.0, 13.0, 18.0]}}),
    # Phi-4-mini: RoPE over the first 3/4 of each head (12 of 16 dims), alone and with LongRoPE (six
    # factors a set) past the original context
    "phi3_partial_rotary": dict(arch="phi3", seed=40, extra={"pad_token_id": 0, "partial_rotary_factor": 0.75}),
    # the same in bf16: the permuted q/k rows stay in 16 bits
    "phi3_partial_rotary_bf16": dict(arch="phi3", dtype="BF16", seed=42,
                                     extra={"pad_token_id": 0, "partial_rotary_factor": 0.75}),
    "phi3_partial_longrope": dict(arch="phi3", seed=41, extra={
        "pad_token_id": 0, "partial_rotary_factor": 0.75, "original_max_position_embeddings": 16,
        "rope_scaling": {"type": "longrope", "short_factor": [1.0] * 6, "long_factor": [1.0, 1.5, 2.5, 4.0, 6.0, 9.0]}}),
    "phi3_longrope_long_prompt": dict(arch="phi3", seed=36, extra={
        "pad_token_id": 0, "original_max_position_embeddings": 16,
        "rope_scaling": {"rope_type": "longrope", "short_factor": [1.0] * 8,
                         "long_factor": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]}}),
    # OLMo 2: no norm before either block, norms after both; q and k RMS-normalised across all of a
    # token's heads (q_norm [heads * head_dim]) before RoPE; rms_norm_eps left to Olmo2Config's 1e-5
    "olmo2_gqa": dict(arch="olmo2", seed=27, extra={"rms_norm_eps": DEFAULT, "pad_token_id": 0}),
    "olmo2_mha_tied_bf16": dict(arch="olmo2", tied=True, dtype="BF16", kv_heads=6, seed=28,
                                extra={"rope_theta": 500000.0, "pad_token_id": 0}),
    # OLMo 2 Instruct's chat template (Tulu's, which writes BOS itself) on a tokenizer that adds none:
    # recorded with --chat, the prompt's ids must be transformers' apply_chat_template's
    "olmo2_tulu_chat": dict(arch="olmo2", seed=29, chat=True, extra={"pad_token_id": 0},
                            tokenizer_config={"add_bos_token": False, "chat_template": TULU}),
    # DeepSeek-R1's distilled Llama: BOS, the fullwidth-bar turns, the reply's <think> opened
    "llama_r1_chat": dict(seed=34, chat=True, tokenizer_config={"add_bos_token": False, "chat_template": R1}),
    # OLMo 3: OLMo 2's layers, all but every 4th local (a window, the global base unscaled), YaRN on
    # the global ones with the attention factor given. rope_theta is the released models' 500000:
    # transformers gives the local layers of a config.json without rope_parameters Olmo3Config's
    # default base (500000) whatever rope_theta says, KVScope the global layers' base
    "olmo3_yarn": dict(arch="olmo3", seed=32, layers=4,
                       extra={"sliding_window": 8, "rope_theta": 500000.0, "pad_token_id": 0,
                              "rope_scaling": {"rope_type": "yarn", "factor": 8.0, "attention_factor": 1.2,
                                               "original_max_position_embeddings": 64}}),
    # YaRN RoPE scaling (Qwen3's long-context setting): the attention factor from the factor; and
    # DeepSeek's mscale pair, other betas, no truncation of the blend's bounds
    "qwen3_yarn": dict(arch="qwen3", seed=31, dim=64, heads=4, kv_heads=2, head_dim=16,
                       extra={"rope_scaling": {"rope_type": "yarn", "factor": 4.0,
                                               "original_max_position_embeddings": 128}}),
    "llama_yarn_mscale": dict(seed=33, dim=64, heads=4, kv_heads=2, head_dim=16,
                              extra={"rope_scaling": {"rope_type": "yarn", "factor": 16.0, "mscale": 0.707,
                                                      "mscale_all_dim": 1.0, "beta_fast": 8.0, "beta_slow": 2.0,
                                                      "truncate": False, "original_max_position_embeddings": 32}}),
    # SmolLM3: Llama's layers, every 4th without RoPE (NoPE), tied by default; then NoPE layers listed
    "smollm3_nope": dict(arch="smollm3", seed=37, layers=4, tied=True,
                         extra={"tie_word_embeddings": DEFAULT, "rope_theta": DEFAULT, "pad_token_id": 0}),
    "smollm3_listed": dict(arch="smollm3", seed=38, extra={"no_rope_layers": [0, 1, 0], "pad_token_id": 0}),
    # ... with use_sliding_window: the window on its NoPE layers (the 4th here)
    "smollm3_sw": dict(arch="smollm3", seed=46, layers=4,
                       extra={"use_sliding_window": True, "sliding_window": 8, "pad_token_id": 0}),
    # Granite: Llama with multipliers on the embeddings, each block's output and the logits, and its
    # own score scale in place of head_dim^-1/2 (IBM's 3.x values but the score scale, 0.2 here)
    "granite_multipliers": dict(arch="granite", seed=39, tied=True,
                                extra={"embedding_multiplier": 12.0, "residual_multiplier": 0.22,
                                       "attention_multiplier": 0.2, "logits_scaling": 8.0}),
    # the same in bf16 with IBM's score scale (1/64: a power of two once times sqrt(head_dim), so q
    # keeps its bf16 panels scaled; 0.22 does not, so the output and down projections keep theirs
    # and carry 0.22 as a factor)
    "granite_multipliers_bf16": dict(arch="granite", seed=43, tied=True, dtype="BF16",
                                     extra={"embedding_multiplier": 12.0, "residual_multiplier": 0.22,
                                            "attention_multiplier": 0.015625, "logits_scaling": 8.0}),
    # EXAONE 4: OLMo 2's norms after the blocks with Qwen3's per-head QK-norm; with a window, every
    # 4th layer global and without RoPE (NoPE), the local ones rotated as the global would be
    # (linear scaling here); without one, every layer global and rotated
    "exaone4_hybrid": dict(arch="exaone4", seed=42, layers=4,
                           extra={"sliding_window": 8, "rope_scaling": {"rope_type": "linear", "factor": 2.0}}),
    "exaone4_global": dict(arch="exaone4", seed=43, tied=True,
                           extra={"sliding_window": None, "layer_types": ["full_attention"] * 3}),
    "mistral_sw16": dict(arch="mistral", seed=13, extra={"sliding_window": 16}),
    "mistral_sw_null": dict(arch="mistral", seed=14, extra={"sliding_window": None}),
    "mistral_mqa_hd24_sw12": dict(arch="mistral", seed=15, dim=64, heads=4, kv_heads=1, head_dim=24,
                                  extra={"sliding_window": 12}),
    # the end tokens of generation_config.json: 245 is the 4th greedy token of these weights
    # (llama_f32_untied's), so the text must end there
    "eos_list_genconfig": dict(gen_eos=[2, 245], must_stop=True),
    # tie_word_embeddings true but the checkpoint has its own lm_head: transformers 5 uses it
    "tied_own_lm_head": dict(tied=True, lm_head=True, seed=21),
}
# Gemma 3 with a vision tower (Gemma3ForConditionalGeneration, as its 4B-27B models are published), built
# and saved by transformers itself, its text_config then left sparse as the hub's are: the language model's
# attention against transformers running the whole model on text
VISION = ["gemma3_vision_sparse"]
# config.json re-saved by transformers 5: RoPE settings move into rope_parameters
RESAVED = {"t5cfg_llama_rope_linear": "llama_rope_linear", "t5cfg_llama_rope_llama3": "llama_rope_llama3",
           "t5cfg_mistral_sw16": "mistral_sw16", "t5cfg_olmo3_yarn": "olmo3_yarn"}


def to_bytes(a, dtype):
    """The float32 array `a` as little-endian F32, F16 or BF16 (round to nearest even) bytes."""
    a = np.ascontiguousarray(a, dtype=np.float32)
    if dtype == "F32":
        return a.tobytes()
    if dtype == "F16":
        return a.astype(np.float16).tobytes()
    u = a.view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16).tobytes()


def write_safetensors(path, tensors, dtype):
    header, blobs, off = {}, [], 0
    for name, a in tensors.items():
        b = to_bytes(a, dtype)
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def write_checkpoint(d, tokenizer_dir, arch="llama", dim=96, hidden=160, layers=3, heads=6, kv_heads=2,
                     head_dim=None, vocab=512, tied=False, lm_head=None, bias=False, dtype="F32", shards=1,
                     seed=0, extra=None, gen_eos=None, tokenizer_config=None):
    """A random checkpoint in folder d with stories260K-hf's tokenizer (vocab 512). q/k weights are
    scaled up so that attention is far from uniform. lm_head: write lm_head.weight (default: when
    untied). gen_eos: eos_token_id of a generation_config.json. tokenizer_config: settings that replace
    those of stories260K-hf's tokenizer_config.json."""
    rng = np.random.default_rng(seed)
    hd = head_dim or {"qwen3": 128, "gemma2": 256, "gemma3": 256}.get(arch, dim // heads)  # transformers' defaults
    Q, KV = heads * hd, kv_heads * hd
    a = 1 / np.sqrt(dim)

    def U(shape, s):
        return rng.uniform(-s, s, size=shape).astype(np.float32)

    # Gemma's norms scale by 1 + weight: its weights are drawn around 0, so that every variant's
    # norms scale by about 1 (and its q/k norms by 0.5 to 2)
    gemma = arch in ("gemma2", "gemma3")
    shift = 1.0 if gemma else 0.0

    def norm():
        return rng.uniform(0.8 - shift, 1.2 - shift, dim).astype(np.float32)

    t = {"model.embed_tokens.weight": U((vocab, dim), 1 / np.sqrt(dim) if gemma else 1.0)}
    for i in range(layers):
        p = f"model.layers.{i}."
        if arch not in ("olmo2", "olmo3", "exaone4"):
            t[p + "input_layernorm.weight"] = norm()
        t[p + "self_attn.q_proj.weight"] = U((Q, dim), 3 * a)
        t[p + "self_attn.k_proj.weight"] = U((KV, dim), 3 * a)
        t[p + "self_attn.v_proj.weight"] = U((KV, dim), a)
        t[p + "self_attn.o_proj.weight"] = U((dim, Q), 1 / np.sqrt(Q))
        if bias:
            t[p + "self_attn.q_proj.bias"] = U((Q,), 0.5)
            t[p + "self_attn.k_proj.bias"] = U((KV,), 0.5)
            t[p + "self_attn.v_proj.bias"] = U((KV,), 0.5)
        if arch in ("qwen3", "gemma3", "olmo2", "olmo3", "exaone4"):  # OLMo's across all heads, the others' per head
            qn, kn = (Q, KV) if arch.startswith("olmo") else (hd, hd)
            t[p + "self_attn.q_norm.weight"] = rng.uniform(0.5 - shift, 2.0 - shift, qn).astype(np.float32)
            t[p + "self_attn.k_norm.weight"] = rng.uniform(0.5 - shift, 2.0 - shift, kn).astype(np.float32)
        t[p + "post_attention_layernorm.weight"] = norm()
        if gemma:
            t[p + "pre_feedforward_layernorm.weight"] = norm()
        if gemma or arch.startswith("olmo") or arch == "exaone4":
            t[p + "post_feedforward_layernorm.weight"] = norm()
        t[p + "mlp.gate_proj.weight"] = U((hidden, dim), a)
        t[p + "mlp.up_proj.weight"] = U((hidden, dim), a)
        t[p + "mlp.down_proj.weight"] = U((dim, hidden), 1 / np.sqrt(hidden))
    if arch == "phi3":  # stacked as Phi-3 stores them
        for i in range(layers):
            p = f"model.layers.{i}."
            t[p + "self_attn.qkv_proj.weight"] = np.concatenate(
                [t.pop(p + f"self_attn.{x}_proj.weight") for x in "qkv"])
            t[p + "mlp.gate_up_proj.weight"] = np.concatenate(
                [t.pop(p + "mlp.gate_proj.weight"), t.pop(p + "mlp.up_proj.weight")])
    t["model.norm.weight"] = norm()
    if lm_head if lm_head is not None else not tied:
        t["lm_head.weight"] = U((vocab, dim), 3 * a)
    cfg = {"architectures": [{"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM",
                              "qwen3": "Qwen3ForCausalLM", "phi3": "Phi3ForCausalLM", "gemma2": "Gemma2ForCausalLM",
                              "gemma3": "Gemma3ForCausalLM", "olmo2": "Olmo2ForCausalLM", "olmo3": "Olmo3ForCausalLM",
                              "smollm3": "SmolLM3ForCausalLM", "granite": "GraniteForCausalLM",
                              "exaone4": "Exaone4ForCausalLM",
                              "mistral": "MistralForCausalLM"}[arch]],
           "model_type": arch if arch != "gemma3" else "gemma3_text", "hidden_size": dim, "intermediate_size": hidden, "num_hidden_layers": layers,
           "num_attention_heads": heads, "num_key_value_heads": kv_heads, "vocab_size": vocab,
           "max_position_embeddings": 512, "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "hidden_act": "silu",
           "tie_word_embeddings": tied, "bos_token_id": 1, "eos_token_id": 2,
           "torch_dtype": {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}[dtype]}
    if arch in ("llama", "qwen3"):
        cfg["attention_bias"] = bias
    if gemma:
        del cfg["hidden_act"]
        cfg["hidden_activation"] = "gelu_pytorch_tanh"
    if head_dim:
        cfg["head_dim"] = head_dim
    cfg.update(extra or {})
    cfg = {k: v for k, v in cfg.items() if v is not DEFAULT}
    os.makedirs(d)
    write_json(os.path.join(d, "config.json"), cfg)
    if gen_eos is not None:
        write_json(os.path.join(d, "generation_config.json"), {"bos_token_id": 1, "eos_token_id": gen_eos})
    for fn in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(os.path.join(tokenizer_dir, fn), d)
    if tokenizer_config:
        with open(os.path.join(d, "tokenizer_config.json")) as f:
            tc = json.load(f)
        write_json(os.path.join(d, "tokenizer_config.json"), dict(tc, **tokenizer_config))
    if shards == 1:
        write_safetensors(os.path.join(d, "model.safetensors"), t, dtype)
        return
    weight_map = {}
    for s in range(shards):
        fn = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        part = list(t)[s::shards]
        write_safetensors(os.path.join(d, fn), {n: t[n] for n in part}, dtype)
        weight_map.update(dict.fromkeys(part, fn))
    write_json(os.path.join(d, "model.safetensors.index.json"), {"metadata": {}, "weight_map": weight_map})


def write_gemma3_vision(d, tokenizer_dir, seed=24):
    """A random Gemma3ForConditionalGeneration (a one-layer vision tower) saved by transformers in float32, with
    stories260K-hf's tokenizer; its text_config then loses the values Gemma3TextConfig gives by default (the
    attention heads among them), as the hub's checkpoints leave them out."""
    from transformers import Gemma3Config, Gemma3ForConditionalGeneration, Gemma3TextConfig
    text = dict(hidden_size=64, intermediate_size=160, num_hidden_layers=3, num_attention_heads=8, num_key_value_heads=4,
                head_dim=16, vocab_size=512, max_position_embeddings=512, sliding_window=8, query_pre_attn_scalar=24,
                initializer_range=0.3, layer_types=["sliding_attention", "full_attention", "sliding_attention"])
    vision = dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2, image_size=28,
                  patch_size=14)
    cfg = Gemma3Config(text_config=text, vision_config=vision, mm_tokens_per_image=4, boi_token_index=3,
                       eoi_token_index=4, image_token_index=5, bos_token_id=1, eos_token_id=2)
    torch.manual_seed(seed)
    Gemma3ForConditionalGeneration(cfg).to(torch.float32).save_pretrained(d)
    path = os.path.join(d, "config.json")
    with open(path) as f:
        saved = json.load(f)
    default = Gemma3TextConfig().to_dict()
    saved["text_config"] = {k: v for k, v in saved["text_config"].items() if k == "model_type" or v != default.get(k)}
    if "num_attention_heads" in saved["text_config"]:
        raise RuntimeError("the sparse text_config still holds num_attention_heads")
    write_json(path, saved)
    for fn in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(os.path.join(tokenizer_dir, fn), d)


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=1)


def resave_config(src, dst):
    """Copies checkpoint src to dst with its config.json re-saved by this transformers."""
    shutil.copytree(src, dst)
    os.remove(os.path.join(dst, "config.json"))
    AutoConfig.from_pretrained(src).save_pretrained(dst)
    with open(os.path.join(dst, "config.json")) as f:
        if "rope_parameters" not in json.load(f):
            raise RuntimeError("the re-saved config.json has no rope_parameters")


def install_lse_capture():
    """Wraps the eager attention function of HF's Llama, Mistral, Qwen2, Qwen3, Phi-3, Gemma 2, Gemma 3, OLMo 2 and 3, SmolLM3, Granite and EXAONE 4 so
    that each call also appends the log-sum-exp of its masked, scaled (and soft-capped: Gemma 2) scores
    ([batch, heads, queries]) to the list returned."""
    captured = []
    for name in ("llama", "mistral", "qwen2", "qwen3", "phi3", "gemma2", "gemma3", "olmo2", "olmo3", "smollm3",
                 "granite", "exaone4"):
        mod = importlib.import_module(f"transformers.models.{name}.modeling_{name}")

        def wrapped(module, query, key, value, attention_mask, scaling, dropout=0.0,
                    _orig=mod.eager_attention_forward, _mod=mod, **kw):
            keys = _mod.repeat_kv(key, module.num_key_value_groups)
            scores = torch.matmul(query, keys.transpose(2, 3)) * scaling
            if kw.get("softcap") is not None:
                scores = torch.tanh(scores / kw["softcap"]) * kw["softcap"]
            if attention_mask is not None:
                scores = scores + attention_mask
            captured.append(torch.logsumexp(scores.double(), dim=-1).detach())
            return _orig(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kw)
        mod.eager_attention_forward = wrapped
    return captured


LSE = install_lse_capture()


def load_hf(d, **kw):
    """The checkpoint in float64 with eager attention (kw: gguf_file, a GGUF file in folder d, which
    transformers dequantizes to float32 values). HF Llama's attention_bias also adds an o_proj bias,
    which these checkpoints lack (KVScope refuses one): it is zero on both sides."""
    model, info = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float64, attn_implementation="eager",
                                                       output_loading_info=True, **kw)
    missing = set(info["missing_keys"])
    o_bias = {k for k in missing if k.endswith("self_attn.o_proj.bias")}
    if missing - o_bias or info["unexpected_keys"]:
        raise RuntimeError(f"transformers: missing {sorted(missing - o_bias)}, "
                           f"unexpected {sorted(info['unexpected_keys'])}")
    params = dict(model.named_parameters())
    with torch.no_grad():
        for k in o_bias:
            params[k].zero_()
    return model.eval()


def end_tokens(model):
    """The tokens that end a text for KVScope: the eos_token_id(s) of config.json and
    generation_config.json and the BOS (the tokenizer's, here the same as the config's)."""
    ends = {model.config.bos_token_id, model.config.eos_token_id}
    gen_eos = model.generation_config.eos_token_id
    ends.update(gen_eos if isinstance(gen_eos, list) else [gen_eos])
    return ends - {None}


def run_kvscope(kvscope, command, *args):
    """`kvscope COMMAND ARGS...`; a RuntimeError with the end of its stderr when it fails."""
    r = subprocess.run([kvscope, command, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"kvscope {command} exited {r.returncode}: {r.stderr.strip()[-300:]}")


def record(kvscope, model, trace, steps, *flags):
    """`kvscope record --device cpu` of `model` into `trace`; flags: the prompt's and others."""
    run_kvscope(kvscope, "record", "--model", model, "--steps", str(steps), "--out", trace, "--device", "cpu",
                "--quiet", *flags)


def first_difference(kv, ref):
    """Where two token lists (or texts) first differ, and the next few items of each there."""
    k = next((i for i, (x, y) in enumerate(zip(kv, ref)) if x != y), min(len(kv), len(ref)))
    return f"at {k}: kvscope {kv[k:k + 5]!r}, transformers {ref[k:k + 5]!r}"


def compare(model, trace, steps, must_stop=False):
    """Compares a trace of `steps` steps with the float64 model. Returns (tokens text, max attention
    diff, max lse diff relative, max prefill window diff, list of failures)."""
    with h5py.File(trace, "r") as f:
        ids = f["tokens/ids"][...].tolist()
        P = int(f.attrs["prompt_len"])
        dec = f["attention/decode"][...].astype(np.float64)         # [n, L, H, T]
        dec_lse = f["attention/decode_lse"][...].astype(np.float64)  # [n, L, H]
        qpos = f["attention/decode_query_pos"][...]
        pw = f["attention/prefill_window"][...].astype(np.float64)   # [L, H, W, P]
        pw_lse = f["attention/prefill_window_lse"][...].astype(np.float64)
        dec_tol, pw_tol = (F16_TOL if f[k].dtype == np.float16 else ATTN_TOL
                           for k in ("attention/decode", "attention/prefill_window"))
    n, L, _, T = dec.shape
    fails = []
    if T != len(ids) or len(ids) != P + n or list(qpos) != list(range(P, P + n)):
        fails.append(f"trace layout: {len(ids)} tokens, prompt {P}, {n} decode rows of {T}, query_pos {qpos}")
        return "-", None, None, None, fails

    LSE.clear()
    with torch.no_grad():
        out = model(torch.tensor([ids]), output_attentions=True, use_cache=False)
    logits = out.logits[0].numpy()
    att = [x[0].numpy() for x in out.attentions]  # L x [H, T, T]
    lse = [x[0].numpy() for x in LSE]             # L x [H, T]
    if len(att) != L or len(lse) != L:
        raise RuntimeError(f"{len(att)} attention maps and {len(lse)} lse captures for {L} layers")

    def rel(a, b):
        return float((np.abs(a - b) / np.maximum(1.0, np.abs(b))).max())
    d_attn = max(float(np.abs(dec[s, l] - att[l][:, q]).max()) for s, q in enumerate(qpos) for l in range(L))
    d_lse = max(rel(dec_lse[s, l], lse[l][:, q]) for s, q in enumerate(qpos) for l in range(L))
    W = pw.shape[2]
    d_pw = max(float(np.abs(pw[l] - att[l][:, P - W:P, :P]).max()) for l in range(L))
    d_lse = max([d_lse] + [rel(pw_lse[l], lse[l][:, P - W:P]) for l in range(L)])
    if d_attn > dec_tol:
        fails.append(f"decode attention rows differ by {d_attn:.2e} > {dec_tol:g}")
    if d_lse > LSE_TOL:
        fails.append(f"lse differs by {d_lse:.2e} (relative) > {LSE_TOL:g}")
    if d_pw > pw_tol:
        fails.append(f"prefill window differs by {d_pw:.2e} > {pw_tol:g}")

    # KVScope stops before an end token (not recorded); HF's generate includes its eos in the output.
    ends = end_tokens(model)
    gen = ids[P:]
    stopped = n < steps
    if must_stop and not stopped:
        fails.append(f"generated all {steps} tokens; expected an end token ({sorted(ends)}) first")
    argmax = logits.argmax(axis=-1)
    tf_diff = [t for t in range(P, T) if argmax[t - 1] != ids[t]]
    if tf_diff:
        t = tf_diff[0]
        fails.append(f"teacher-forced argmax differs at position {t}: kvscope {ids[t]}, transformers {argmax[t - 1]}")
    if stopped and argmax[T - 1] not in ends:
        fails.append(f"kvscope stopped after {n} tokens; transformers' next token {argmax[T - 1]} ends nothing")
    with torch.no_grad():
        hf = model.generate(torch.tensor([ids[:P]]), max_new_tokens=steps, do_sample=False,
                            pad_token_id=0)[0, P:].tolist()
    LSE.clear()
    gen_ok = hf[:n] == gen and (len(hf) > n and hf[n] in ends if stopped else len(hf) == n)
    if not gen_ok:
        fails.append(f"HF generate's tokens differ {first_difference(gen, hf)}")
    ok = not tf_diff and gen_ok
    tokens = f"{'equal' if ok else 'DIFFER'} {n}{'+end' if stopped else ''}"
    return tokens, d_attn, d_lse, d_pw, fails


def prompt_ids(trace):
    """The prompt's token ids of a trace and the prompt (with --chat: in its chat format)."""
    with h5py.File(trace, "r") as f:
        return f["tokens/ids"][:int(f.attrs["prompt_len"])].tolist(), f.attrs["prompt"]


def check_smollm2(gguf, kvscope, work):
    """KVScope's default model against transformers loading the same GGUF file: the prompt tokens of
    SMOL_PROMPTS, of SMOL_CHAT and SMOL_FILE with --chat (ids and chat-formatted text), then
    compare() on SMOL_FILE's trace. Returns what compare() does."""
    folder, name = os.path.split(gguf)
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    fails = []
    for i, p in enumerate(SMOL_PROMPTS):
        trace = os.path.join(work, f"smollm2_prompt{i}.h5")
        record(kvscope, gguf, trace, 1, "--prompt", p)
        ids, ref = prompt_ids(trace)[0], tok(p)["input_ids"]
        if ids != ref:
            fails.append(f"prompt {p!r}: ids differ {first_difference(ids, ref)}")
    sink = os.path.join(work, "smollm2.h5")
    record(kvscope, gguf, os.path.join(work, "smollm2_chat.h5"), 1, "--prompt", SMOL_CHAT, "--chat")
    record(kvscope, gguf, sink, SMOL_STEPS, "--prompt-file", SMOL_FILE, "--chat")
    with open(SMOL_FILE, encoding="utf-8-sig") as f:
        sink_text = f.read().rstrip("\r\n")  # as KVScope reads --prompt-file
    for p, trace in ((SMOL_CHAT, "smollm2_chat.h5"), (sink_text, "smollm2.h5")):
        ids, text = prompt_ids(os.path.join(work, trace))
        msgs = [{"role": "user", "content": p}]
        ref_text = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
        ref = tok.apply_chat_template(msgs, add_generation_prompt=True, return_dict=True)["input_ids"]
        if text != ref_text:
            fails.append(f"--chat of {p[:40]!r}: text differs {first_difference(text, ref_text)}")
        if ids != ref:
            fails.append(f"--chat of {p[:40]!r}: ids differ {first_difference(ids, ref)}")
    tokens, da, dl, dp, more = compare(load_hf(folder, gguf_file=name), sink, SMOL_STEPS)
    return tokens, da, dl, dp, fails + more


def check(name, a):
    """Runs variant `name`; returns what compare() does."""
    if name == "smollm2":
        return check_smollm2(a.smollm2, a.kvscope, a.work)
    prompt, steps, must_stop, chat = PROMPT, STEPS, False, False
    if name == "stories260K-hf":
        d, prompt, steps = a.stories, STORIES_PROMPT, STORIES_STEPS
    elif name in VISION:
        d = os.path.join(a.work, name)
        write_gemma3_vision(d, a.stories)
    else:
        d = os.path.join(a.work, name)
        src = RESAVED.get(name, name)  # the variant whose checkpoint this is
        spec = dict(VARIANTS[src])
        must_stop = spec.pop("must_stop", False)
        chat = spec.pop("chat", False)
        base = os.path.join(a.work, src)
        if not os.path.isdir(base):
            write_checkpoint(base, a.stories, **spec)
        if name in RESAVED:
            resave_config(base, d)
    trace = os.path.join(a.work, name + ".h5")
    if not chat:
        record(a.kvscope, d, trace, steps, "--prompt", prompt)
        return compare(load_hf(d), trace, steps, must_stop)
    record(a.kvscope, d, trace, steps, "--prompt", prompt, "--chat")
    tokens, da, dl, dp, fails = compare(load_hf(d), trace, steps, must_stop)
    with h5py.File(trace, "r") as f:
        ids = f["tokens/ids"][:int(f.attrs["prompt_len"])].tolist()
    ref = AutoTokenizer.from_pretrained(d).apply_chat_template([{"role": "user", "content": prompt}],
                                                               add_generation_prompt=True, return_dict=True)
    if ids != ref["input_ids"]:
        fails.append(f"--chat prompt ids differ {first_difference(ids, ref['input_ids'])}")
    return tokens, da, dl, dp, fails


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kvscope", required=True, help="the kvscope binary")
    ap.add_argument("--stories", required=True, help="the stories260K-hf folder (also the tokenizer)")
    ap.add_argument("--smollm2", required=True, help="SmolLM2-135M-Instruct.Q4_1.gguf (smollm2: skipped if absent)")
    ap.add_argument("--work", required=True, help="an empty folder for checkpoints and traces")
    ap.add_argument("variants", nargs="*", help="run only these (default: all)")
    a = ap.parse_args()
    if int(transformers.__version__.split(".")[0]) < 5:
        ap.error(f"needs transformers >= 5 (this is {transformers.__version__})")
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()

    names = list(VARIANTS) + VISION + list(RESAVED) + ["stories260K-hf", "smollm2"]
    unknown = [v for v in a.variants if v not in names]
    if unknown:
        ap.error(f"unknown variant(s) {', '.join(unknown)} (known: {', '.join(names)})")
    print(f"KVScope vs transformers {transformers.__version__} (torch {torch.__version__}, float64 eager); "
          f"tolerances: attention {ATTN_TOL:g} ({F16_TOL:g} float16), lse {LSE_TOL:g} relative", flush=True)
    failed, skipped = [], []
    for name in a.variants or names:
        if name == "smollm2" and not (os.path.isfile(a.smollm2) and os.path.getsize(a.smollm2)):
            print(f"{name:24} SKIP  no model at {a.smollm2} (scripts/fetch-model.sh fetches it)", flush=True)
            skipped.append(name)
            continue
        try:
            tokens, da, dl, dp, fails = check(name, a)
        except Exception as e:  # a failure of kvscope, of this variant's setup or of transformers: report, go on
            tokens, da, dl, dp, fails = "-", None, None, None, [f"{type(e).__name__}: {e}"]
        diffs = "  ".join(f"{k} {'-' if v is None else f'{v:.1e}':>7}"
                          for k, v in (("attn", da), ("lse", dl), ("prefill", dp)))
        print(f"{name:24} tokens {tokens:13} {diffs}  {'FAIL' if fails else 'PASS'}", flush=True)
        for msg in fails:
            print(f"    {msg}", flush=True)
        if fails:
            failed.append(name)
    ran = len(a.variants or names) - len(skipped)
    skip = f" ({len(skipped)} skipped: {', '.join(skipped)})" if skipped else ""
    if failed:
        print(f"check-transformers: FAIL: {len(failed)} of {ran} variants disagree: {', '.join(failed)}{skip}")
        return 1
    print(f"check-transformers: PASS: all {ran} variants agree with transformers{skip}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
