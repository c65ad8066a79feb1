#!/usr/bin/env python3
"""HF transformers beside bench_cuda: prefill and decode tokens/s of a Llama model of the same
shape (random fp16 weights on the GPU, attn_implementation="eager") with output_attentions=True,
at the same contexts, in the same table layout (context, prefill tok/s, decode tok/s first).

Usage: python3 scripts/bench-hf-eager.py [--shape 8b|small|135m|tiny] [--contexts 1024,4096,8192,32768]
                                         [--steps 32] [--no-to-host]

Per context T: one forward pass over T random tokens with output_attentions=True and
use_cache=True (timed; the prompt's attentions stay on the GPU), then --steps decode steps, one
token at a time, each with output_attentions=True and, with --to-host (the default), every
layer's attention row copied to the host (.cpu()), since a trace must hold them. Decode tokens
are fixed random ids (forced, as in bench_cuda). Times are wall clock around
torch.cuda.synchronize(); decode tok/s is 1 / the median step.

When the prefill with attentions runs out of GPU memory (eager attention holds [heads, T, T]
per layer, and output_attentions keeps all layers' maps), the row says OOM and the cache is
filled instead by chunks of 2048 tokens without attentions, so that decode is still measured.

Needs torch with CUDA and transformers (the GPU machine has them); without them it says so and
exits 0.
"""
# Comparing with bench_cuda (done by hand in README, not here): put this table beside
# bench_cuda's for the same --shape, --contexts and --steps on the same machine. The ratio
# ours/HF = bench_cuda's "decode tok/s, capture on" (a trace recorded) or its "rows to host"
# column ÷ this table's decode tok/s (attentions to host); the target is >= 10x at 4096.
# Prefill: bench_cuda's prefill tok/s ÷ this table's (HF keeps the whole maps; bench_cuda's
# recorder keeps the reductions computed on the device).

import argparse
import gc
import inspect
import statistics
import sys
import time

SHAPES = {
    # The shapes of bench/bench_cuda.cpp's config_for().
    "8b": dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
               num_key_value_heads=8, head_dim=128, vocab_size=128256),
    "small": dict(hidden_size=1024, intermediate_size=3584, num_hidden_layers=8, num_attention_heads=8,
                  num_key_value_heads=2, head_dim=128, vocab_size=32000),
    "135m": dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
                 num_key_value_heads=3, head_dim=64, vocab_size=49152),
    "tiny": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=16, vocab_size=256),
}
CHUNK = 2048  # tokens per forward pass when filling the cache without attentions


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shape", choices=sorted(SHAPES), default="8b")
    p.add_argument("--contexts", default="1024,4096,8192,32768",
                   help="comma-separated prompt lengths (default: %(default)s)")
    p.add_argument("--steps", type=int, default=32, help="decode steps per context (default: %(default)s)")
    p.add_argument("--to-host", dest="to_host", action="store_true", default=True,
                   help="copy each decode step's attentions to the host (default)")
    p.add_argument("--no-to-host", dest="to_host", action="store_false",
                   help="leave the decode attentions on the GPU")
    a = p.parse_args()
    try:
        a.contexts = [int(t) for t in a.contexts.split(",")]
    except ValueError:
        p.error(f"--contexts: expected comma-separated integers, got {a.contexts!r}")
    if not a.contexts or min(a.contexts) < 1 or a.steps < 1:
        p.error("--contexts and --steps must be positive")
    return a


def random_ids(n, seed, vocab, torch):
    g = torch.Generator(device="cpu").manual_seed(seed)
    return torch.randint(0, vocab, (1, n), generator=g)


def build_model(shape, max_len, torch, transformers):
    cfg_args = dict(SHAPES[shape], max_position_embeddings=max_len, rms_norm_eps=1e-5,
                    tie_word_embeddings=False, attention_bias=False, mlp_bias=False)
    config = transformers.LlamaConfig(**cfg_args, attn_implementation="eager")
    # Llama 3's RoPE base: top-level rope_theta before transformers 5, inside rope_parameters since
    # (it changes the rotation angles only, not the work).
    if isinstance(getattr(config, "rope_parameters", None), dict):
        config.rope_parameters["rope_theta"] = 500000.0
    else:
        config.rope_theta = 500000.0
    try:
        config._attn_implementation = "eager"
    except AttributeError:  # read-only where the constructor's attn_implementation is the way
        pass
    torch.manual_seed(0)
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float16)
    try:
        with torch.device("cuda"):  # random init on the GPU, in fp16
            model = transformers.LlamaForCausalLM(config)
    finally:
        torch.set_default_dtype(old)
    if hasattr(model, "set_attn_implementation"):
        model.set_attn_implementation("eager")
    model.eval()
    return model


def forward_kwargs(model):
    """Asks for the last position's logits only where this transformers allows it (bench_cuda
    computes only those)."""
    params = inspect.signature(model.forward).parameters
    if "logits_to_keep" in params:
        return {"logits_to_keep": 1}
    if "num_logits_to_keep" in params:
        return {"num_logits_to_keep": 1}
    return {}


def sync_time(torch):
    torch.cuda.synchronize()
    return time.perf_counter()


def run_context(model, T, steps, to_host, torch, extra):
    """Returns (prefill tok/s or None when it ran out of memory, decode tok/s, note)."""
    vocab = model.config.vocab_size
    prompt = random_ids(T, 1000 + T, vocab, torch).cuda()
    forced = random_ids(steps, 7, vocab, torch).cuda()
    prefill_tps, note, past = None, "", None

    oom = False
    try:
        t0 = sync_time(torch)
        out = model(input_ids=prompt, use_cache=True, output_attentions=True, **extra)
        t1 = sync_time(torch)
        if not out.attentions or out.attentions[0] is None:
            note = "prefill returned no attentions; "
        past = out.past_key_values
        del out
        prefill_tps = T / (t1 - t0)
    except torch.cuda.OutOfMemoryError:
        oom = True
    if oom:
        print(f"OOM at {T} (prefill with output_attentions=True)", flush=True)
        past = None
        gc.collect()
        torch.cuda.empty_cache()
        note += "prefill OOM; cache filled in 2048-token chunks without attentions; "
        for c0 in range(0, T, CHUNK):
            out = model(input_ids=prompt[:, c0:c0 + CHUNK], past_key_values=past, use_cache=True,
                        output_attentions=False, **extra)
            past = out.past_key_values
            del out
        torch.cuda.synchronize()
    gc.collect()
    torch.cuda.empty_cache()

    times = []
    for i in range(steps):
        t0 = sync_time(torch)
        out = model(input_ids=forced[:, i:i + 1], past_key_values=past, use_cache=True,
                    output_attentions=True, **extra)
        if to_host:
            host = [a.cpu() for a in out.attentions]  # the copy waits for the step
            del host
        t1 = sync_time(torch)
        past = out.past_key_values
        del out
        times.append(t1 - t0)
    return prefill_tps, 1.0 / statistics.median(times), note


def main():
    args = parse_args()
    try:
        import torch
        import transformers
    except ImportError as e:
        print(f"bench-hf-eager: nothing measured: {e} (needs torch and transformers)")
        return 0
    if not torch.cuda.is_available():
        print("bench-hf-eager: nothing measured: torch sees no CUDA GPU")
        return 0

    props = torch.cuda.get_device_properties(0)
    print(f"GPU: {props.name}, {props.total_memory / 2**30:.1f} GiB; torch {torch.__version__}, "
          f"transformers {transformers.__version__}")
    max_len = max(args.contexts) + args.steps + 16
    t0 = time.perf_counter()
    model = build_model(args.shape, max_len, torch, transformers)
    n_params = sum(p.numel() for p in model.parameters())
    c = model.config
    print(f"model: HF LlamaForCausalLM ({args.shape} shape), dim {c.hidden_size}, hidden {c.intermediate_size}, "
          f"{c.num_hidden_layers} layers, {c.num_attention_heads} heads ({c.num_key_value_heads} KV), vocab "
          f"{c.vocab_size}, untied; {n_params / 1e9:.2f}B parameters, random fp16 on the GPU in "
          f"{time.perf_counter() - t0:.1f} s; attention: {getattr(c, '_attn_implementation', '?')}")
    extra = forward_kwargs(model)
    print(f"decode: {args.steps} steps fed forced random tokens, output_attentions=True, attentions "
          f"{'copied to the host (.cpu()) every step' if args.to_host else 'left on the GPU (--no-to-host)'}; "
          f"prefill: output_attentions=True, use_cache=True, the maps left on the GPU"
          + (f"; {next(iter(extra))}=1" if extra else ""))

    results = []
    with torch.inference_mode():
        # Warm-up: kernels, cuBLAS, the allocator.
        run_context(model, min(64, max_len - args.steps - 8), 2, args.to_host, torch, extra)
        for T in args.contexts:
            t0 = time.perf_counter()
            try:
                prefill, decode, note = run_context(model, T, args.steps, args.to_host, torch, extra)
                results.append((T, prefill, decode, note))
                pre = f"{prefill:.0f}" if prefill else "OOM"
                print(f"context {T}: done in {time.perf_counter() - t0:.1f} s (prefill {pre} tok/s, "
                      f"decode {decode:.1f} tok/s)", flush=True)
            except torch.cuda.OutOfMemoryError:
                print(f"OOM at {T}", flush=True)
                results.append((T, None, None, "OOM"))
            gc.collect()
            torch.cuda.empty_cache()

    host = "to host" if args.to_host else "on GPU"
    print(f"\n| context | prefill tok/s (output_attentions) | decode tok/s (output_attentions, {host}) | "
          f"ms/token | notes |")
    print("|---|---|---|---|---|")
    for T, prefill, decode, note in results:
        pre = f"{prefill:.0f}" if prefill else "OOM"
        dec = f"{decode:.1f}" if decode else "OOM"
        ms = f"{1000.0 / decode:.1f}" if decode else "-"
        print(f"| {T} | {pre} | {dec} | {ms} | {note.rstrip('; ') or '-'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
