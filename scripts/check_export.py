#!/usr/bin/env python3
"""Cross-check of scripts/hf_record.py (the exporter for models KVScope cannot run) against KVScope's recorder.

Each case records one model and prompt twice, with `hf_record.py --dtype float32 --device-map cpu` (HF
transformers, the "kvscope" attention function, scripts/kvscope_trace.py) and `kvscope record --device cpu`,
and compares the traces: the root attributes both write alike, the same tokens and token texts, every decode row
(and prefill window row) within the tolerances of check_transformers.py, log-sum-exps within 1e-4 relative,
the prefill column sums, the full map (float16: one float16 step) or the pooled overview; then `kvscope simulate`
of h2o, snapkv, tova and streamingllm at budget 16 on each must keep the same positions at every step and give
the same mean metrics (within 1e-4 relative). Cases: stories260K-hf; stories260K-hf on a 341-token prompt with
a 1 MiB capture budget (pooled map, float16 rows, prefill in blocks of 9 queries); check_transformers.py's
random Llama (F32, BF16), Qwen2 (q/k/v biases), Qwen3 (QK-norm, head_dim 32), Gemma 2 (soft-capped scores),
Gemma 3 (local and global layers), OLMo 2 (norms after the blocks only, QK-norm across heads), Mistral (sliding windows, MQA, head_dim 24) checkpoints, one whose generation_config.json ends the text
early and a byte-level BPE one recorded with --chat (ChatML's special tokens, characters split into byte tokens). Then architectures KVScope does not run (OLMo, GPT-NeoX,
GPT-2, DeepSeek-V3), tiny random models whose rows must match transformers' own eager attention within 1e-5;
and the exporter's refusals of bad input and of architectures it cannot record (Bloom, gpt-oss, Falcon, Jamba):
one line, exit 2, no file. One line per case, then a summary; exit status 1 when anything disagrees. Run it
through scripts/check-transformers.sh export.

usage: check_export.py --kvscope BIN --stories DIR --work DIR
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

os.environ.setdefault("TQDM_DISABLE", "1")  # before tqdm's import: transformers' loading and saving bars
import h5py
import numpy as np
import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM

sys.dont_write_bytecode = True  # no __pycache__ in scripts/ from this import
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from check_transformers import (ATTN_TOL, F16_TOL, LSE_TOL, PROMPT, SMOL_PROMPTS, STEPS,  # noqa: E402
                                STORIES_PROMPT, STORIES_STEPS, VARIANTS, first_difference, record, write_checkpoint)
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # noqa: E402

PROMPTS = os.path.join(HERE, "..", "assets", "prompts")
PASSKEY, SINK = os.path.join(PROMPTS, "passkey.txt"), os.path.join(PROMPTS, "sink.txt")
POLICIES = ["h2o", "snapkv:window=8", "tova", "streamingllm"]
BUDGET = 16
OWN_TOKENIZER = "MODEL/tokenizer.json"  # in CASES' flags: the checkpoint's tokenizer.json
METRIC_TOL = 1e-4  # relative to max(1, |value|), the runs' mean metrics
# Root attributes both writers set from the same inputs (not: writer_version, created, seed).
SAME_ATTRS = ["model", "model_path", "tokenizer_path", "arch", "device", "device_dtype", "n_layers", "n_heads",
              "n_kv_heads", "head_dim", "vocab_size", "prompt_len", "n_steps", "prompt", "temperature", "top_p",
              "decode_dtype", "has_prefill_map", "capture_note"]
# Qwen2-Instruct's chat template: ChatML with a default system message (KVScope's "chatml" format)
CHATML = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
          "{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}"
          "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}{% endfor %}"
          "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
# name -> (model: "stories", "byte_level" or a VARIANTS checkpoint, prompt flags, steps, more flags for both,
# environment)
CASES = {
    "stories260K-hf": ("stories", ["--prompt", STORIES_PROMPT], STORIES_STEPS, [], {}),
    "stories260K-hf_pooled_f16": ("stories", ["--prompt-file", PASSKEY], 40,
                                  ["--capture-budget-mb", "1", "--decode-dtype", "float16"],
                                  {"KVSCOPE_QUERY_BLOCK_BYTES": str(40 << 10)}),
    "llama_f32_untied": ("llama_f32_untied", ["--prompt", PROMPT], STEPS, [], {}),
    "llama_bf16": ("llama_bf16", ["--prompt", PROMPT], STEPS, [], {}),
    # transformers reads a qwen2 model's tokenizer.json as Qwen2Tokenizer (byte-level) whatever it holds: these
    # checkpoints hold stories260K-hf's SentencePiece-style one, given as it is written with --tokenizer
    "qwen2_bias_tied": ("qwen2_bias_tied", ["--prompt", PROMPT], STEPS, ["--tokenizer", OWN_TOKENIZER], {}),
    "qwen3_tied_hd32": ("qwen3_tied_hd32", ["--prompt", PROMPT], STEPS, ["--tokenizer", OWN_TOKENIZER], {}),
    "gemma2_caps_tied": ("gemma2_caps_tied", ["--prompt", PROMPT], STEPS, ["--tokenizer", OWN_TOKENIZER], {}),
    "gemma3_pattern2_tied": ("gemma3_pattern2_tied", ["--prompt", PROMPT], STEPS, ["--tokenizer", OWN_TOKENIZER],
                             {}),
    "olmo2_gqa": ("olmo2_gqa", ["--prompt", PROMPT], STEPS, ["--tokenizer", OWN_TOKENIZER], {}),
    "mistral_sw16": ("mistral_sw16", ["--prompt", PROMPT], STEPS, [], {}),
    "mistral_mqa_hd24_sw12": ("mistral_mqa_hd24_sw12", ["--prompt", PROMPT], STEPS, ["--decode-dtype", "float16"],
                              {}),
    "eos_list_genconfig": ("eos_list_genconfig", ["--prompt", PROMPT], STEPS, [], {}),
    # split characters (byte tokens: \xNN texts), special tokens of the chat format
    "chatml_byte_level": ("byte_level", ["--prompt", "Lily said: café 日本語 🙂", "--chat"], STEPS, [], {}),
}


# Architectures KVScope does not run, each a tiny random model from its config class: hf_record.py's rows against
# transformers' own eager attention (output_attentions=True over the recorded tokens).
TINY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            vocab_size=512, max_position_embeddings=512, bos_token_id=1, eos_token_id=2, pad_token_id=0)
ARCHS = {
    "olmo": dict(TINY, num_key_value_heads=4, clip_qkv=0.5),  # LayerNorm without weights; q, k, v clipped
    "gpt_neox": dict(TINY, num_key_value_heads=4),        # partial rotary embedding, multi-head attention
    "gpt2": dict(TINY, num_key_value_heads=4),            # learned absolute positions
    "deepseek_v3": dict(TINY, num_key_value_heads=4, q_lora_rank=None, kv_lora_rank=16, qk_nope_head_dim=16,
                        qk_rope_head_dim=8, v_head_dim=16, n_routed_experts=4, num_experts_per_tok=2,
                        moe_intermediate_size=32, first_k_dense_replace=1, n_group=1, topk_group=1),  # MLA, MoE
}
# Architectures it refuses, with the reason it gives.
REFUSED_ARCHS = {
    "bloom": (dict(TINY, n_layer=2, n_head=4), "did not compute their attention through"),     # ALiBi, own code
    "gpt_oss": (dict(TINY, head_dim=16, num_local_experts=4, num_experts_per_tok=2, sliding_window=8),
                "sink logits"),                                                                # rows sum below 1
    "falcon": (dict(TINY, new_decoder_architecture=True, num_kv_heads=2), "attention classes of its own"),
    "jamba": (dict(TINY, num_experts=2, attn_layer_period=2, attn_layer_offset=1, expert_layer_period=2,
                   expert_layer_offset=1, mamba_d_state=4), "1 of 2 layers"),                   # Mamba layers
}


def write_tiny(d, model_type, config, stories):
    """A random model of `model_type` (seeded) with stories260K-hf's tokenizer files."""
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(AutoConfig.for_model(model_type, **config)).save_pretrained(d)
    for fn in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(os.path.join(stories, fn), d)


def check_architecture(model_type, a):
    """hf_record.py on a tiny random model against eager attention: (largest decode row and window row
    differences, failures)."""
    d, out = os.path.join(a.work, model_type), os.path.join(a.work, model_type + ".h5")
    write_tiny(d, model_type, ARCHS[model_type], a.stories)
    r = hf_record(d, out, 12, ["--prompt", PROMPT, "--tokenizer", os.path.join(d, "tokenizer.json"), "--dtype",
                               "float32", "--quiet"])
    if r.returncode != 0:
        return None, None, [f"hf_record.py exited {r.returncode}: {r.stderr.strip()[-300:]}"]
    with h5py.File(out, "r") as f:
        ids, P = f["tokens/ids"][...], int(f.attrs["prompt_len"])
        dec, win = f["attention/decode"][...], f["attention/prefill_window"][...]
    model = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32, attn_implementation="eager")
    with torch.no_grad():
        out = model(torch.from_numpy(ids[None].astype(np.int64)), output_attentions=True, use_cache=False)
    att = [x[0].numpy() for x in out.attentions]
    n, L, W = dec.shape[0], dec.shape[1], win.shape[2]
    if len(att) != L:
        return None, None, [f"{len(att)} eager attention maps for {L} layers"]
    d_rows = max(absdiff(dec[s, l], att[l][:, P + s]) for s in range(n) for l in range(L))
    d_win = max(absdiff(win[l], att[l][:, P - W:P, :P]) for l in range(L))
    fails = [f"{what} differ from eager by {v:.2e} > {ATTN_TOL:g}" for what, v in (("rows", d_rows),
                                                                                  ("window rows", d_win))
             if v > ATTN_TOL]
    return d_rows, d_win, fails


def check_refused_architectures(a):
    """Each of REFUSED_ARCHS gives its reason in one line, exit status 2, and no file."""
    fails = []
    for model_type, (config, reason) in REFUSED_ARCHS.items():
        d, out = os.path.join(a.work, model_type), os.path.join(a.work, model_type + ".h5")
        write_tiny(d, model_type, config, a.stories)
        r = hf_record(d, out, 4, ["--prompt", PROMPT, "--tokenizer", os.path.join(d, "tokenizer.json")])
        lines = r.stderr.strip().splitlines()
        if r.returncode != 2 or len(lines) != 1 or reason not in lines[0] or os.path.exists(out):
            fails.append(f"{model_type}: exit {r.returncode}, stderr {r.stderr.strip()[-200:]!r}")
    return fails


def write_byte_level_checkpoint(d):
    """A random Llama checkpoint with a byte-level BPE tokenizer trained on ASCII text (so that other characters
    are split into byte tokens), ChatML's special tokens and chat template."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=512, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator([PROMPT, STORIES_PROMPT] + [p for p in SMOL_PROMPTS if p.isascii()], trainer)
    tokdir = d + "_tokenizer"
    os.makedirs(tokdir)
    tok.save(os.path.join(tokdir, "tokenizer.json"))
    with open(os.path.join(tokdir, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "TokenizersBackend", "eos_token": "<|im_end|>", "chat_template": CHATML}, f)
    with open(os.path.join(tokdir, "special_tokens_map.json"), "w") as f:
        json.dump({}, f)
    write_checkpoint(d, tokdir, seed=40)


def hf_record(model, out, steps, flags, env=None):
    """scripts/hf_record.py with this python, offline; returns the CompletedProcess."""
    cmd = [sys.executable, os.path.join(HERE, "hf_record.py"), "--model", model, "--steps", str(steps),
           "--out", out, *flags]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})}
    return subprocess.run(cmd, capture_output=True, text=True, env=env)


def rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float((np.abs(a - b) / np.maximum(1.0, np.abs(b))).max()) if a.size else 0.0


def absdiff(a, b):
    return float(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)).max()) if np.size(a) else 0.0


def compare(exported, kvscope):
    """Compares the two traces; returns (tokens text, {measure: largest difference}, failures)."""
    fails, d = [], {}
    with h5py.File(exported, "r") as e, h5py.File(kvscope, "r") as k:
        for name in SAME_ATTRS:
            if name not in e.attrs or e.attrs[name] != k.attrs[name]:
                fails.append(f"attribute {name}: exported {e.attrs.get(name)!r}, kvscope {k.attrs[name]!r}")
        ids_e, ids_k = e["tokens/ids"][...].tolist(), k["tokens/ids"][...].tolist()
        if ids_e != ids_k:
            fails.append(f"tokens differ {first_difference(ids_e, ids_k)}")
            return "DIFFER", d, fails
        texts_e, texts_k = e["tokens/text"].asstr()[...].tolist(), k["tokens/text"].asstr()[...].tolist()
        if texts_e != texts_k:
            fails.append(f"token texts differ {first_difference(texts_e, texts_k)}")
        P = int(k.attrs["prompt_len"])
        n = len(ids_k) - P
        ea, ka = e["attention"], k["attention"]
        if ea["decode_query_pos"][...].tolist() != ka["decode_query_pos"][...].tolist():
            fails.append("decode_query_pos differ")
        tol = F16_TOL if ka["decode"].dtype == np.float16 else ATTN_TOL
        if ea["decode"].dtype != ka["decode"].dtype or ea["decode"].shape != ka["decode"].shape:
            fails.append(f"decode {ea['decode'].dtype} {ea['decode'].shape}, kvscope {ka['decode'].dtype} "
                         f"{ka['decode'].shape}")
            return f"equal {n}", d, fails
        d["attn"] = max(absdiff(ea["decode"][s], ka["decode"][s]) for s in range(n))
        d["lse"] = max(rel(ea["decode_lse"][...], ka["decode_lse"][...]),
                       rel(ea["prefill_window_lse"][...], ka["prefill_window_lse"][...]))
        d["window"] = absdiff(ea["prefill_window"][...], ka["prefill_window"][...])
        d["colsum"] = absdiff(ea["prefill_colsum"][...], ka["prefill_colsum"][...]) / P
        if ea["prefill_window"].attrs["window"] != ka["prefill_window"].attrs["window"]:
            fails.append("prefill window sizes differ")
        for what, limit in (("attn", tol), ("lse", LSE_TOL), ("window", ATTN_TOL), ("colsum", ATTN_TOL)):
            if d[what] > limit:
                fails.append(f"{what} differs by {d[what]:.2e} > {limit:g}")
        if "prefill" in ka:
            d["map"] = absdiff(ea["prefill"][...], ka["prefill"][...]) if "prefill" in ea else np.inf
            limit = F16_TOL
        else:
            block = ka["prefill_pooled"].attrs["block"]
            same_block = "prefill_pooled" in ea and ea["prefill_pooled"].attrs["block"] == block
            d["map"] = absdiff(ea["prefill_pooled"][...], ka["prefill_pooled"][...]) if same_block else np.inf
            limit = ATTN_TOL
        if d["map"] > limit:
            fails.append(f"prefill map differs by {d['map']:.2e} > {limit:g} (or is missing or otherwise pooled)")
        stopped = "+end" if "ended the text" in k.attrs["capture_note"] else ""
    return f"equal {n}{stopped}", d, fails


def simulate(kvscope, trace):
    """`kvscope simulate` of POLICIES on a copy of trace: {run name: (summary, kept [n, L, Hkv, T])}."""
    copy = trace[:-3] + "_sim.h5"
    shutil.copy(trace, copy)
    flags = [x for p in POLICIES for x in ("--policy", p)]
    r = subprocess.run([kvscope, "simulate", copy, *flags, "--budget", str(BUDGET), "--json"], capture_output=True,
                       text=True)
    if r.returncode != 0:
        raise RuntimeError(f"kvscope simulate {os.path.basename(trace)} exited {r.returncode}: {r.stderr.strip()}")
    with h5py.File(copy, "r") as f:
        return {run["name"]: (run, f["runs"][run["name"]]["kept"][...]) for run in json.loads(r.stdout)}


def compare_simulations(kvscope, exported, reference):
    """Failures where the runs on the exported trace differ from those on KVScope's."""
    fails = []
    se, sk = simulate(kvscope, exported), simulate(kvscope, reference)
    if sorted(se) != sorted(sk):
        return [f"simulated runs {sorted(se)} and {sorted(sk)}"]
    for name, (run_k, kept_k) in sk.items():
        run_e, kept_e = se[name]
        if not np.array_equal(kept_e, kept_k):
            step = int(np.argwhere(kept_e != kept_k)[0][0])
            fails.append(f"{name}: kept sets differ from step {step} on")
        for m, v in run_k.items():
            if m.startswith("mean_") and rel(run_e[m], v) > METRIC_TOL:
                fails.append(f"{name}: {m} {run_e[m]:.6g}, on KVScope's trace {v:.6g}")
    return fails


def check_case(name, a):
    model, prompt, steps, flags, env = CASES[name]
    if model == "stories":
        d = a.stories
    elif model == "byte_level":
        d = os.path.join(a.work, model)
        write_byte_level_checkpoint(d)
    else:
        d = os.path.join(a.work, model)
        spec = {k: v for k, v in VARIANTS[model].items() if k != "must_stop"}
        write_checkpoint(d, a.stories, **spec)
    flags = [os.path.join(d, "tokenizer.json") if f == OWN_TOKENIZER else f for f in flags]
    exported, reference = (os.path.join(a.work, f"{name}_{who}.h5") for who in ("hf", "kvscope"))
    r = hf_record(d, exported, steps, [*prompt, *flags, "--dtype", "float32", "--device-map", "cpu", "--quiet"],
                  env)
    if r.returncode != 0:
        raise RuntimeError(f"hf_record.py exited {r.returncode}: {r.stderr.strip()[-400:]}")
    record(a.kvscope, d, reference, steps, *prompt, *flags)
    tokens, diffs, fails = compare(exported, reference)
    if not fails:
        fails = compare_simulations(a.kvscope, exported, reference)
    return tokens, diffs, fails


def check_refusals(a):
    """Bad input gives one line on stderr, exit status 2 and no file."""
    out = os.path.join(a.work, "refused.h5")
    model = a.stories
    cases = {
        "missing model": (os.path.join(a.work, "no-such-model"), ["--prompt", "x"]),
        "empty prompt": (model, ["--prompt", ""]),
        "unknown flag": (model, ["--prompt", "x", "--bogus"]),
        "missing prompt file": (model, ["--prompt-file", os.path.join(a.work, "none.txt")]),
        "--chat without a template": (model, ["--prompt", "x", "--chat"]),
        "out in a missing folder": (model, ["--prompt", "x", "--out", os.path.join(a.work, "none", "t.h5")]),
        "text ended at once": (model, ["--prompt-file", SINK]),  # stories260K's first token after it is BOS
    }
    fails = []
    for what, (m, flags) in cases.items():
        r = hf_record(m, out, 4, flags)
        lines = r.stderr.strip().splitlines()
        if r.returncode != 2 or len(lines) != 1 or not lines[0].startswith("hf_record: ") or os.path.exists(out):
            fails.append(f"{what}: exit {r.returncode}, stderr {r.stderr.strip()[-200:]!r}")
    return len(cases), fails


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kvscope", required=True, help="the kvscope binary")
    ap.add_argument("--stories", required=True, help="the stories260K-hf folder (also the tokenizer)")
    ap.add_argument("--work", required=True, help="an empty folder for checkpoints and traces")
    a = ap.parse_args()
    transformers.logging.set_verbosity_error()
    print(f"hf_record.py vs kvscope record --device cpu; tolerances: attention {ATTN_TOL:g} ({F16_TOL:g} float16), "
          f"lse {LSE_TOL:g} relative; simulate {', '.join(POLICIES)} at budget {BUDGET}", flush=True)
    failed = []
    for name in CASES:
        try:
            tokens, diffs, fails = check_case(name, a)
        except Exception as e:  # a failure of either recorder or of the setup: report, go on
            tokens, diffs, fails = "-", {}, [f"{type(e).__name__}: {e}"]
        shown = "  ".join(f"{k} {diffs[k]:.1e}" if k in diffs else f"{k} -" for k in
                          ("attn", "lse", "window", "colsum", "map"))
        print(f"export_{name:26} tokens {tokens:10} {shown}  {'FAIL' if fails else 'PASS'}", flush=True)
        for msg in fails:
            print(f"    {msg}", flush=True)
        if fails:
            failed.append(name)
    for model_type in ARCHS:
        try:
            d_rows, d_win, fails = check_architecture(model_type, a)
        except Exception as e:  # transformers' setup of this architecture, or its eager pass
            d_rows, d_win, fails = None, None, [f"{type(e).__name__}: {e}"]
        shown = "  ".join(f"{k} {'-' if v is None else f'{v:.1e}'}" for k, v in (("rows", d_rows), ("window", d_win)))
        print(f"export_arch_{model_type:21} vs transformers' eager attention: {shown}  {'FAIL' if fails else 'PASS'}",
              flush=True)
        for msg in fails:
            print(f"    {msg}", flush=True)
        if fails:
            failed.append(model_type)
    count, fails = check_refusals(a)
    fails += check_refused_architectures(a)
    print(f"export_{'refusals':26} {count} bad inputs and {len(REFUSED_ARCHS)} architectures "
          f"({', '.join(REFUSED_ARCHS)}): one line, exit 2, no file  {'FAIL' if fails else 'PASS'}")
    for msg in fails:
        print(f"    {msg}")
    if fails:
        failed.append("refusals")
    total = len(CASES) + len(ARCHS) + 1
    if failed:
        print(f"check-export: FAIL: {len(failed)} of {total} cases disagree: {', '.join(failed)}")
        return 1
    print(f"check-export: PASS: all {total} cases agree with kvscope record or transformers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
