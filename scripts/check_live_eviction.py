#!/usr/bin/env python3
"""Cross-check of KVScope's live eviction (`kvscope rerun`) against HF transformers.

Records stories260K-hf (`kvscope record --device cpu`, a 26-token prompt, 60 steps), reruns copies
of the trace with full, streamingllm, h2o and snapkv:window=4 at budget 16, in --mode forced (fed
the trace's tokens) and --mode free (each run writes its own), and replays every run in
transformers in float64 with the run's stored kept sets as attention masks.

The masks go through transformers' AttentionInterface: an attention function registered as
"kvmask" (set on the model after check_transformers.load_hf) ignores the causal mask transformers
passes and adds its own per (layer, query head): prompt rows are causal (prefill evicts nothing);
the decode row at query position P + s (step s) of query head h in layer l attends exactly the keys
with kept[s, l, h // G] == 1 (G query heads per KV head), the run's set "as at the moment of that
step's attention". One forward pass over the tokens the run fed reproduces the incremental run: a
row's output depends only on its own mask and on the keys and values of the positions it attends,
and those come from the lower layer's output at that position, computed once under that
position's own row mask, as the live run computed them before caching them (RoPE at the original
positions, as without --rope-in-cache).

Per run it compares the attention rows and lse with HF's (the tolerances of check_transformers.py);
in free mode HF's masked argmax must be the run's next token at every step; the stored top1_agree
must be HF's exactly, kl (KL(full || run), full: the unmasked model on the trace's tokens) and
ref_logprob within METRIC_TOL, at the compared steps (free: while the run's text is the trace's),
and NaN at the others. Negative control: for streamingllm and h2o, masking step s with step s - 1's
kept set (plus its own position) must disagree, so the check can fail. One line per run, then a
summary; exit status 1 when a run disagrees. Run it through scripts/check-transformers.sh.

usage: check_live_eviction.py --kvscope BIN --stories DIR --work DIR
"""
import argparse
import os
import shutil
import sys

import h5py
import numpy as np
import torch
import transformers
from transformers import AttentionInterface
from transformers.models.llama.modeling_llama import repeat_kv

sys.dont_write_bytecode = True  # no __pycache__ in scripts/ from this import
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_transformers import ATTN_TOL, LSE_TOL, first_difference, load_hf, record, run_kvscope  # noqa: E402

PROMPT = "Once upon a time, there was a little girl named Lily. She loved to play outside"  # 26 tokens
STEPS, BUDGET = 60, 16
POLICIES = ["full", "streamingllm", "h2o", "snapkv:window=4"]
CONTROLLED = {"streamingllm", "h2o"}  # policies whose kept sets change from step to step
METRIC_TOL = 1e-4  # absolute, kl and ref_logprob (float32 in the trace)

MASKS = []    # per layer, the additive mask [H, T, T] that kvmask_attention applies
CAPTURE = []  # per layer, (attention probabilities [H, T, T], lse [H, T]) of the last forward()


def kvmask_attention(module, query, key, value, attention_mask, scaling, dropout=0.0, **kw):
    """Eager attention with MASKS[layer] in place of the mask transformers passes."""
    keys = repeat_kv(key, module.num_key_value_groups)
    scores = torch.matmul(query, keys.transpose(2, 3)) * scaling + MASKS[module.layer_idx]
    w = torch.softmax(scores, dim=-1)
    CAPTURE.append((w[0].numpy(), torch.logsumexp(scores, dim=-1)[0].numpy()))
    out = torch.matmul(w, repeat_kv(value, module.num_key_value_groups))
    return out.transpose(1, 2).contiguous(), w


AttentionInterface.register("kvmask", kvmask_attention)


def forward(model, ids, P, kept=None):
    """One pass over ids; decode row P + s masked with kept[s] ([n, L, Hkv, T]; None: all causal).
    Returns the log-probabilities [T, vocab] and CAPTURE."""
    cfg = model.config
    T, H = len(ids), cfg.num_attention_heads
    causal = np.where(np.tril(np.ones((T, T), bool)), 0.0, -np.inf)
    MASKS.clear()
    for l in range(cfg.num_hidden_layers):
        m = np.repeat(causal[None], H, axis=0)
        if kept is not None:
            heads = np.arange(H) // (H // cfg.num_key_value_heads)     # query head -> its KV head
            rows = kept[:, l][:, heads, :T].transpose(1, 0, 2) == 1   # [H, n, T]
            m[:, P:P + rows.shape[1]] = np.where(rows, 0.0, -np.inf)
        MASKS.append(torch.tensor(m))
    CAPTURE.clear()
    with torch.no_grad():
        logits = model(torch.tensor([ids]), use_cache=False).logits[0]
    return torch.log_softmax(logits, dim=-1).numpy(), list(CAPTURE)


def row_diffs(g, P, capture):
    """The largest differences of the run's attention rows (absolute) and lse (relative) from HF's."""
    ra, rl = g["attention"][...].astype(np.float64), g["lse"][...].astype(np.float64)  # [n, L, H, T], [n, L, H]
    n = ra.shape[0]
    d_attn = max(float(np.abs(ra[:, l] - att[:, P:P + n].transpose(1, 0, 2)).max())
                 for l, (att, _) in enumerate(capture))
    d_lse = max(float((np.abs(rl[:, l] - lse[:, P:P + n].T) / np.maximum(1.0, np.abs(lse[:, P:P + n].T))).max())
                for l, (_, lse) in enumerate(capture))
    return d_attn, d_lse


def check_run(model, f, name, full_lp):
    """Replays run `name` of trace f; full_lp: the unmasked model's log-probabilities on the trace's
    tokens. Returns (tokens text, top1 text, attn diff, lse diff, kl diff, logprob diff, control
    attn diff or None, failures)."""
    g = f["runs/" + name]
    P, n, mode = int(f.attrs["prompt_len"]), int(g.attrs["n_steps"]), g.attrs["mode"]
    trace = f["tokens/ids"][...].tolist()
    run = g["tokens"][...].tolist()
    T = P + n
    shape = g["attention"].shape  # [n, L, H, T]
    if g["kept"].shape[0] != n or (shape[0], shape[3]) != (n, T) or len(run) != T \
            or (mode == "forced" and run != trace):
        return "-", "-", None, None, None, None, None, [f"run layout: {n} steps, {len(run)} tokens, "
                                                      f"attention {g['attention'].shape}, prompt {P}"]
    kept = g["kept"][...]
    lp, capture = forward(model, run, P, kept)
    d_attn, d_lse = row_diffs(g, P, capture)
    fails = []
    if d_attn > ATTN_TOL:
        fails.append(f"attention rows differ by {d_attn:.2e} > {ATTN_TOL:g}")
    if d_lse > LSE_TOL:
        fails.append(f"lse differs by {d_lse:.2e} (relative) > {LSE_TOL:g}")
    tokens = f"forced {n}"
    if mode == "free":
        hf = lp[P - 1:T - 1].argmax(axis=-1).tolist()
        tokens = f"{'equal' if hf == run[P:] else 'DIFFER'} {n}"
        if hf != run[P:]:
            fails.append(f"HF's masked argmax differs from the run's tokens {first_difference(run[P:], hf)}")

    # the metrics: step s predicts the trace's token P + s + 1, at the last step the full model's choice
    ref = trace[P + 1:] + [int(full_lp[-1].argmax())]
    comp = [s for s in range(n) if run[:P + s + 1] == trace[:P + s + 1]]
    m = {k: g["metrics/" + k][...].astype(np.float64) for k in ("top1_agree", "kl", "ref_logprob")}
    for k, v in m.items():
        if not np.array_equal(np.isnan(v), [s not in comp for s in range(n)]):
            fails.append(f"{k} is not NaN exactly after the {len(comp)} compared steps")
    q, ref = np.array([P + s for s in comp], dtype=int), np.array(ref)[comp]
    top1 = (lp[q].argmax(axis=-1) == ref).astype(np.float64)
    kl = (np.exp(full_lp[q]) * (full_lp[q] - lp[q])).sum(axis=-1)
    d_kl = float(np.abs(m["kl"][comp] - kl).max())
    d_lp = float(np.abs(m["ref_logprob"][comp] - lp[q, ref]).max())
    if not np.array_equal(m["top1_agree"][comp], top1):
        i = int(np.argmax(m["top1_agree"][comp] != top1))
        fails.append(f"top1_agree differs at step {comp[i]}: kvscope {m['top1_agree'][comp[i]]:g}, "
                     f"transformers {top1[i]:g}")
    if d_kl > METRIC_TOL:
        fails.append(f"kl differs by {d_kl:.2e} > {METRIC_TOL:g}")
    if d_lp > METRIC_TOL:
        fails.append(f"ref_logprob differs by {d_lp:.2e} > {METRIC_TOL:g}")

    d_ctl = None
    if g.attrs["policy"] in CONTROLLED:
        prev = kept.copy()
        prev[1:] = kept[:-1]
        prev[np.arange(n), :, :, P + np.arange(n)] = 1  # step s attends its own position
        d_ctl = row_diffs(g, P, forward(model, run, P, prev)[1])[0]
        if d_ctl <= ATTN_TOL:
            fails.append(f"control: step s - 1's kept sets agree too ({d_ctl:.2e}): the masks tell no step apart")
    top1_text = f"{int(top1.sum())}/{len(comp)}"
    return tokens, top1_text, d_attn, d_lse, d_kl, d_lp, d_ctl, fails


def record_and_rerun(a):
    """Records the trace and reruns a copy per mode. Returns the two traces' paths."""
    base = os.path.join(a.work, "live.h5")
    record(a.kvscope, a.stories, base, STEPS, "--prompt", PROMPT)
    traces = []
    for mode in ("forced", "free"):
        trace = os.path.join(a.work, f"live_{mode}.h5")
        shutil.copy(base, trace)
        policies = [x for p in POLICIES for x in ("--policy", p)]
        run_kvscope(a.kvscope, "rerun", trace, *policies, "--budget", str(BUDGET), "--mode", mode, "--device", "cpu")
        traces.append(trace)
    return traces


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kvscope", required=True, help="the kvscope binary")
    ap.add_argument("--stories", required=True, help="the stories260K-hf folder")
    ap.add_argument("--work", required=True, help="an empty folder for the traces")
    a = ap.parse_args()
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    print(f"KVScope live eviction (rerun, budget {BUDGET}, {STEPS} steps) vs transformers {transformers.__version__} "
          f"(float64, the kept sets as masks); tolerances: attention {ATTN_TOL:g}, lse {LSE_TOL:g} relative, "
          f"kl and ref_logprob {METRIC_TOL:g}", flush=True)
    try:
        traces = record_and_rerun(a)
    except Exception as e:
        print(f"check-live-eviction: FAIL: {type(e).__name__}: {e}")
        return 1
    model = load_hf(a.stories)
    model.set_attn_implementation("kvmask")
    failed, ran = [], 0
    for trace in traces:
        with h5py.File(trace, "r") as f:
            full_lp = forward(model, f["tokens/ids"][...].tolist(), int(f.attrs["prompt_len"]))[0]
            for name in sorted(f["runs"]):
                ran += 1
                try:
                    tokens, top1, *diffs, fails = check_run(model, f, name, full_lp)
                except Exception as e:  # a malformed run: report, go on
                    tokens, top1, diffs, fails = "-", "-", [None] * 5, [f"{type(e).__name__}: {e}"]
                cols = "  ".join(f"{k} {'-' if v is None else f'{v:.1e}':>7}"
                                 for k, v in zip(("attn", "lse", "kl", "logprob", "control"), diffs))
                print(f"{name:25} tokens {tokens:9} top1 {top1:5}  {cols}  {'FAIL' if fails else 'PASS'}",
                      flush=True)
                for msg in fails:
                    print(f"    {msg}", flush=True)
                if fails:
                    failed.append(name)
    if failed or ran != 2 * len(POLICIES):
        print(f"check-live-eviction: FAIL: {len(failed)} of {ran} runs disagree: {', '.join(failed) or '-'}"
              + ("" if ran == 2 * len(POLICIES) else f" ({2 * len(POLICIES)} expected)"))
        return 1
    print(f"check-live-eviction: PASS: all {ran} live runs agree with transformers; "
          f"the previous step's kept sets do not ({', '.join(sorted(CONTROLLED))})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
