#!/usr/bin/env python3
"""`kvscope record` for models KVScope cannot run: any causal LM HF transformers runs (device_map="auto" over
the machine's GPUs, or the CPU), recorded into a KVScope trace (docs/trace-format.md) through
scripts/kvscope_trace.py. Greedy decoding, stopping at the model's end-of-text tokens as KVScope does.

Attention is captured by an attention function of its own registered with transformers' AttentionInterface
("kvscope"): per layer, logits = q k^T * scaling (masked as SDPA masks them) in float32, their log-sum-exp,
softmax in float32, output = probs v as eager attention computes it (probs cast to v's dtype; GQA: query head
h reads KV head h // (H / Hkv)). Each layer's probabilities are reduced where they are, on that layer's device
(prefill, in blocks of queries: column sums, the last W = min(64, P) rows, the full map when L*H*P*P*4 bytes
fit the capture budget, else the map pooled in blocks; decode: the new query's row per head), and only those
reductions are copied to the host. Decode steps are written as they come.

usage: hf_record.py --model PATH_OR_NAME [--tokenizer tokenizer.json] (--prompt TEXT | --prompt-file F) [--chat]
                    [--steps N] [--dtype auto|float32|bfloat16|float16] [--device-map auto|cpu|cuda]
                    [--decode-dtype float32|float16] [--capture-budget-mb N] [--quiet] --out trace.h5
Needs torch, transformers >= 5 (accelerate for --device-map auto), h5py and numpy. Errors: one line, exit 2.
"""
import argparse
import inspect
import json
import os
import re
import sys
import time

os.environ.setdefault("TQDM_DISABLE", "1")  # transformers' loading bars
sys.dont_write_bytecode = True  # no __pycache__ in scripts/ from importing kvscope_trace
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import numpy as np
    import torch
    import transformers
    from transformers import (AttentionInterface, AttentionMaskInterface, AutoModelForCausalLM, AutoTokenizer,
                              PreTrainedTokenizerFast)
    from transformers.masking_utils import sdpa_mask

    import kvscope_trace
except ImportError as e:
    print(f"hf_record: {e} (needs torch, transformers >= 5, h5py and numpy)", file=sys.stderr)
    sys.exit(2)

VERSION = "hf_record.py 1"
# transformers' model_type -> the arch KVScope writes for the same model (its GGUF name), where they differ
ARCH_NAMES = {"gemma3_text": "gemma3"}
# float32 probabilities of one block of prefill queries (all heads of a layer); the environment variable
# KVSCOPE_QUERY_BLOCK_BYTES sets it lower (scripts/check_export.py: many blocks on a tiny model).
QUERY_BLOCK_BYTES = int(os.environ.get("KVSCOPE_QUERY_BLOCK_BYTES", 256 << 20))
# Markers that end a text where the vocabulary holds them as one token (inference/loader.cpp, text_end_ids).
END_MARKERS = ("<|endoftext|>", "<|end_of_text|>", "<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<|end|>",
               "<end_of_turn>", "<|EOT|>")


class RecordError(Exception):
    """An input or model this recorder refuses; main() prints it as one line and exits 2."""


def fail(message):
    print(f"hf_record: {message}", file=sys.stderr)
    sys.exit(2)


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (argparse prints its usage too)
        fail(message)


def parse_args(argv):
    p = Parser(prog="hf_record.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="HF model folder (or a hub name)")
    p.add_argument("--tokenizer", help="a tokenizer.json (with the tokenizer_config.json beside it) read as written, "
                   "where transformers would pick the tokenizer class of the model's type (default: the model's)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--prompt", help="the prompt text")
    src.add_argument("--prompt-file", help="a UTF-8 file holding the prompt (its BOM and final line breaks dropped)")
    p.add_argument("--chat", action="store_true", help="wrap the prompt in the tokenizer's chat template")
    p.add_argument("--steps", type=int, default=64, help="tokens to generate (default 64)")
    p.add_argument("--dtype", choices=("auto", "float32", "bfloat16", "float16"), default="auto",
                   help="weights' dtype (default auto: the checkpoint's)")
    p.add_argument("--device-map", choices=("auto", "cpu", "cuda"), default="auto",
                   help="auto: accelerate spreads the layers over the GPUs (the CPU without one)")
    p.add_argument("--decode-dtype", choices=("float32", "float16"), default="float32",
                   help="storage of /attention/decode (default float32)")
    p.add_argument("--capture-budget-mb", type=int, default=256,
                   help="keep the full prefill map when it fits N MiB (default 256)")
    p.add_argument("--quiet", action="store_true", help="print nothing but errors")
    p.add_argument("--out", required=True, help="the trace to write")
    a = p.parse_args(argv)
    if not 1 <= a.steps <= 1 << 20:
        fail(f"--steps: expected 1..{1 << 20}, got {a.steps}")
    if not 0 <= a.capture_budget_mb <= 1 << 20:
        fail(f"--capture-budget-mb: expected 0..{1 << 20}, got {a.capture_budget_mb}")
    return a


def read_prompt(a):
    """The prompt as KVScope reads it: a file's byte-order mark and final line breaks are not part of it."""
    if a.prompt_file is not None:
        try:
            with open(a.prompt_file, "rb") as f:
                data = f.read()
        except OSError as e:
            raise RecordError(f"{a.prompt_file}: cannot read prompt file ({e.strerror})") from None
        data = data.removeprefix(b"\xef\xbb\xbf").rstrip(b"\r\n")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise RecordError(f"{a.prompt_file}: prompt file is not valid UTF-8 text") from None
        where = a.prompt_file
    else:
        text, where = a.prompt, "prompt"
    if not text:
        raise RecordError(f"{where}: is empty")
    if "\0" in text:
        raise RecordError(f"{where}: contains a NUL byte (not text)")
    return text


def _bytes_to_unicode():
    """GPT-2's byte -> printable character table of byte-level BPE vocabularies, inverted."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), 256))
    cs, n = list(bs), 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def _has_type(node, kind):
    """Whether a tokenizer.json component, or one inside its Sequence, is of type `kind`."""
    if not isinstance(node, dict):
        return False
    if node.get("type") == kind:
        return True
    return any(_has_type(n, kind) for key in ("pretokenizers", "decoders") for n in node.get(key) or [])


def token_texts(tok, ids):
    """/tokens/text of each id, as KVScope's tokenizers give it (docs/trace-format.md): the token's bytes as
    decoded mid-text (byte-level symbols and <0xNN> byte pieces as their bytes, SentencePiece's ▁ a space) through
    kvscope_trace.token_text; special tokens (and SentencePiece's unknown token) as their piece text."""
    pieces = tok.convert_ids_to_tokens(list(ids))
    backend = getattr(tok, "backend_tokenizer", None)
    if backend is None:  # no tokenizer.json behind it: the piece as the tokenizer decodes it alone
        return [kvscope_trace.token_text(tok.convert_tokens_to_string([p]).encode()) for p in pieces]
    spec = json.loads(backend.to_str())
    added = {a["id"]: a for a in spec.get("added_tokens") or []}
    byte_level = _has_type(spec.get("pre_tokenizer"), "ByteLevel") or _has_type(spec.get("decoder"), "ByteLevel")
    byte_of = _bytes_to_unicode()
    unk = spec.get("model", {}).get("unk_token")
    texts = []
    for i, piece in zip(ids, pieces):
        if piece is None:  # an id past the tokenizer's vocabulary (the model's may be larger): no text, as KVScope
            texts.append("")
            continue
        a = added.get(int(i))
        if a is not None and (byte_level or a.get("special")) or (not byte_level and piece == unk):
            texts.append(piece)
            continue
        if byte_level:
            data = b"".join(bytes([byte_of[c]]) if c in byte_of else c.encode() for c in piece)
        else:
            m = re.fullmatch(r"<0x([0-9A-Fa-f]{2})>", piece)
            data = bytes([int(m.group(1), 16)]) if m else piece.replace("\u2581", " ").encode()
        texts.append(kvscope_trace.token_text(data))
    return texts


def end_ids(model, tok):
    """Tokens that end the text, as KVScope's: the eos_token_id(s) of config.json and generation_config.json,
    the tokenizer's end and begin tokens, and END_MARKERS the vocabulary holds as one token."""
    ids = set()
    gen = getattr(model, "generation_config", None)
    for v in (model.config.get_text_config().eos_token_id, getattr(gen, "eos_token_id", None),
              tok.eos_token_id, tok.bos_token_id):
        ids.update(v if isinstance(v, (list, tuple)) else [v])
    for marker in END_MARKERS:
        one = tok.encode(marker, add_special_tokens=False)
        if len(one) == 1:
            ids.add(one[0])
    return ids - {None}


class Recorder:
    """Receives every layer's attention probabilities from kvscope_attention and keeps what a trace stores:
    during the prefill (begin_prefill .. prefill_evidence) the reductions of the P x P map, per decode step
    (begin_step .. step_rows) the new query's row of every (layer, head)."""

    def __init__(self, L, H, P, plan, decode_dtype):
        self.L, self.H, self.P, self.plan = L, H, P, plan
        self.decode_dtype = torch.float16 if decode_dtype == "float16" else torch.float32
        self.Hkv = self.head_dim = None
        self.phase = None
        self.calls = 0

    def shape_of(self, module, query, key):
        """The layer of an attention call (module.layer_idx, else the calls' order within the forward pass);
        checks the call's heads against the model's."""
        _, H, _, D = query.shape
        if H != self.H:
            raise RecordError(f"an attention layer has {H} query heads, the model's config {self.H} "
                              "(models with per-layer head counts are not supported)")
        if self.Hkv is None:
            self.Hkv, self.head_dim = key.shape[1], D
        if (key.shape[1], D) != (self.Hkv, self.head_dim) or H % self.Hkv:
            raise RecordError(f"attention layers differ in KV heads or head size ({key.shape[1]} x {D}, "
                              f"first {self.Hkv} x {self.head_dim})")
        layer = getattr(module, "layer_idx", None)
        layer = self.calls if layer is None else int(layer)
        self.calls += 1
        if not 0 <= layer < self.L:
            raise RecordError(f"attention call for layer {layer} of a model of {self.L} layers")
        return layer

    def query_blocks(self, n, K):
        """Blocks of queries computed at once: a decode step's one, else QUERY_BLOCK_BYTES of probabilities,
        whole pooled rows (a multiple of the pool block)."""
        if n == 1:
            return [(0, 1)]
        size = max(1, QUERY_BLOCK_BYTES // (4 * self.H * K))
        b = self.plan.pool_block
        if b:
            size = max(b, size // b * b)
        return [(q0, min(n, q0 + size)) for q0 in range(0, n, size)]

    def begin_prefill(self):
        L, H, P, W = self.L, self.H, self.P, self.plan.window
        self.phase, self.calls = "prefill", 0
        self.colsum = [None] * L                                 # [H, P] on each layer's device
        self.pooled = [None] * L                                 # [H, nb, nb] on each layer's device
        self.rows_seen = [0] * L
        self.window_rows = np.zeros((L, H, W, P), np.float32)
        self.window_lse = np.zeros((L, H, W), np.float32)
        self.full_map = np.zeros((L, H, P, P), np.float16) if self.plan.full_map else None

    def observe(self, layer, q0, n, probs, lse):
        """probs [H, c, K] float32 of queries q0..q0+c-1 (of the n of this call), lse [H, c]."""
        if self.phase == "decode":
            return self.decode_row(layer, n, probs, lse)
        if self.phase != "prefill":
            raise RecordError("attention computed outside a recording's forward passes")
        P, W = self.P, self.plan.window
        H, c, K = probs.shape
        if n != P or K != P:
            raise RecordError(f"prefill attention of {n} queries over {K} keys; expected the prompt's {P}")
        if self.colsum[layer] is None:
            self.colsum[layer] = torch.zeros((H, P), dtype=torch.float32, device=probs.device)
        self.colsum[layer] += probs.sum(dim=1)
        w0, w1 = max(q0, P - W), q0 + c
        if w0 < w1:
            self.window_rows[layer, :, w0 - (P - W):w1 - (P - W)] = probs[:, w0 - q0:].cpu().numpy()
            self.window_lse[layer, :, w0 - (P - W):w1 - (P - W)] = lse[:, w0 - q0:].cpu().numpy()
        if self.full_map is not None:
            self.full_map[layer, :, q0:q0 + c] = probs.half().cpu().numpy()
        elif self.plan.pool_block:
            self.pool(layer, q0, probs)
        self.rows_seen[layer] += c

    def pool(self, layer, q0, probs):
        """Adds the block's queries (whole pool rows from q0 on) to the layer's pooled map: cell (a, b) the mean
        over the queries of pool row a of their mass on the keys of pool column b (kernels/capture.cpp)."""
        P, b = self.P, self.plan.pool_block
        H, c, K = probs.shape
        nb, na, a0 = -(-P // b), -(-c // b), q0 // b
        if self.pooled[layer] is None:
            self.pooled[layer] = torch.zeros((H, nb, nb), dtype=torch.float32, device=probs.device)
        padded = torch.nn.functional.pad(probs, (0, nb * b - K, 0, na * b - c))
        cells = padded.view(H, na, b, nb, b).sum(dim=(2, 4))  # [H, na, nb]
        rows_in = (P - b * torch.arange(a0, a0 + na, device=probs.device)).clamp(max=b).to(torch.float32)
        self.pooled[layer][:, a0:a0 + na] += cells / rows_in[None, :, None]

    def prefill_evidence(self):
        """The arguments of TraceWriter.write_prefill, once every layer's P rows have arrived."""
        missing = [l for l in range(self.L) if self.rows_seen[l] != self.P]
        if missing:
            raise RecordError(f"{len(missing)} of {self.L} layers (first {missing[0]}) did not compute their "
                              "attention through transformers' AttentionInterface: this architecture is not "
                              "supported")
        ev = dict(colsum=np.stack([c.cpu().numpy() for c in self.colsum]), window_rows=self.window_rows,
                  window_lse=self.window_lse, full_map=self.full_map)
        if self.plan.pool_block:
            ev.update(pooled=np.stack([p.cpu().numpy() for p in self.pooled]), pool_block=self.plan.pool_block)
        self.phase = None
        return ev

    def begin_step(self, q):
        self.phase, self.calls, self.q = "decode", 0, q
        np_dtype = np.float16 if self.decode_dtype == torch.float16 else np.float32
        self.rows = np.zeros((self.L, self.H, q + 1), np_dtype)
        self.lse = np.zeros((self.L, self.H), np.float32)
        self.seen = [False] * self.L

    def decode_row(self, layer, n, probs, lse):
        """The step's row of every head of the layer, over keys q+1-K..q (a sliding-window cache keeps the last)."""
        K = probs.shape[2]
        if n != 1 or K > self.q + 1 or self.seen[layer]:
            raise RecordError(f"decode attention of {n} queries over {K} keys at position {self.q} "
                              f"(layer {layer}{' again' if self.seen[layer] else ''})")
        self.rows[layer, :, self.q + 1 - K:] = probs[:, 0].to(self.decode_dtype).cpu().numpy()
        self.lse[layer] = lse[:, 0].cpu().numpy()
        self.seen[layer] = True

    def step_rows(self):
        if not all(self.seen):
            raise RecordError(f"decode step at position {self.q}: {self.seen.count(False)} of {self.L} layers "
                              "computed no attention through transformers' AttentionInterface")
        self.phase = None
        return self.rows, self.lse


RECORDER = None  # the recording in progress, which kvscope_attention reports to


def kvscope_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, softcap=None, **kw):
    """transformers attention function "kvscope": eager attention in float32 that hands its probabilities and
    log-sum-exps to RECORDER. query [1, H, n, D], key and value [1, Hkv, K, D]; returns ([1, n, H, Dv], None)."""
    if kw.get("s_aux") is not None or getattr(module, "sinks", None) is not None:
        raise RecordError("attention with sink logits (s_aux) is not supported: its rows do not sum to 1")
    if query.shape[0] != 1:
        raise RecordError(f"batch of {query.shape[0]} sequences; the recorder records one")
    rec = RECORDER
    layer = rec.shape_of(module, query, key)
    _, H, n, D = query.shape
    Hkv, K = key.shape[1], key.shape[2]
    g = H // Hkv
    scale = D ** -0.5 if scaling is None else scaling
    q = query[0].float().view(Hkv, g, n, D)           # query head h = kv * g + j reads KV head kv
    kt = key[0].float().transpose(1, 2)                # [Hkv, D, K]
    v = value[0]                                       # [Hkv, K, Dv]
    out = torch.empty((H, n, v.shape[-1]), dtype=v.dtype, device=v.device)
    for q0, q1 in rec.query_blocks(n, K):
        c = q1 - q0
        logits = torch.bmm(q[:, :, q0:q1].reshape(Hkv, g * c, D), kt).view(H, c, K) * scale
        if softcap is not None:
            logits = torch.tanh(logits / softcap) * softcap
        if attention_mask is not None:  # SDPA's boolean mask [1, 1 or H, n, K]: True where a key is attended
            allowed = attention_mask[0, :, q0:q1, :K]
        else:  # a plain causal mask SDPA leaves out: this call's query i sits at position K - n + i
            allowed = (torch.arange(K, device=logits.device)[None, :] <=
                       torch.arange(K - n + q0, K - n + q1, device=logits.device)[:, None])
        logits = logits.masked_fill(~allowed, float("-inf"))
        lse = torch.logsumexp(logits, dim=-1)                         # [H, c]
        probs = torch.softmax(logits, dim=-1, dtype=torch.float32)    # [H, c, K]
        rec.observe(layer, q0, n, probs, lse)
        out[:, q0:q1] = torch.bmm(probs.to(v.dtype).view(Hkv, g * c, K), v).view(H, c, -1)
    return out.transpose(0, 1).unsqueeze(0), None


def load(a):
    """(model, tokenizer) with the "kvscope" attention, or RecordError."""
    if int(transformers.__version__.split(".")[0]) < 5:
        raise RecordError(f"needs transformers >= 5 (this is {transformers.__version__})")
    transformers.logging.set_verbosity_error()
    AttentionInterface.register("kvscope", kvscope_attention)
    # boolean masks (sliding windows included), or none where a plain causal one would do: [P, P] bytes at most,
    # where eager attention's additive masks take 2-4 times that
    AttentionMaskInterface.register("kvscope", sdpa_mask)
    if a.device_map == "cuda" and not torch.cuda.is_available():
        raise RecordError("--device-map cuda: no CUDA device")
    dtype = a.dtype if a.dtype == "auto" else getattr(torch, a.dtype)
    try:
        if a.tokenizer is None:
            tok = AutoTokenizer.from_pretrained(a.model)
        elif os.path.basename(a.tokenizer) == "tokenizer.json" and os.path.isfile(a.tokenizer):
            tok = PreTrainedTokenizerFast.from_pretrained(os.path.dirname(os.path.abspath(a.tokenizer)))
        else:
            raise RecordError(f"--tokenizer {a.tokenizer}: expected a tokenizer.json file")
        model = AutoModelForCausalLM.from_pretrained(a.model, dtype=dtype, device_map=a.device_map,
                                                     attn_implementation="kvscope")
    except KeyError as e:
        if e.args == ("kvscope",):  # an architecture that looks its attention classes up by name (Falcon)
            raise RecordError(f"{a.model}: its architecture picks attention classes of its own, not through "
                              "transformers' AttentionInterface: not supported") from None
        raise RecordError(f"{a.model}: cannot load (KeyError {e})") from None
    except (OSError, ValueError, ImportError) as e:
        raise RecordError(f"{a.model}: cannot load ({str(e).strip().splitlines()[0]})") from None
    if model.config._attn_implementation != "kvscope":
        raise RecordError(f"{a.model}: transformers chose attention {model.config._attn_implementation!r}, "
                          "not the recorder's")
    return model.eval(), tok


def encode_prompt(a, tok, prompt):
    """(text fed, its token ids): with --chat the chat template's text, whose tokens it spells itself."""
    if a.chat:
        if not getattr(tok, "chat_template", None):
            raise RecordError(f"--chat: {a.model} has no chat template (a base model)")
        text = tok.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True,
                                       tokenize=False)
        ids = tok(text, add_special_tokens=False)["input_ids"]
    else:
        text, ids = prompt, tok(prompt)["input_ids"]
    if not ids:
        raise RecordError("prompt: encodes to no tokens")
    return text, list(ids)


class TextStream:
    """Prints the prompt, then generated text as it comes (nothing with --quiet): the decoded text's new
    characters, held back while it ends in half a character; end() ends the line. The text is decoded after the
    prompt's last token, so that a SentencePiece tokenizer keeps the first generated word's space."""

    def __init__(self, tok, quiet, prompt_text, last_prompt_id):
        self.tok, self.quiet, self.ids, self.shown, self.ended = tok, quiet, [last_prompt_id], "", quiet
        self.skip = len(self.decoded())
        if not quiet:
            print(prompt_text, end="", flush=True)

    def add(self, token):
        self.ids.append(token)
        text = self.text()
        if not self.quiet and not text.endswith("\ufffd"):
            print(text[len(self.shown):], end="", flush=True)
            self.shown = text

    def decoded(self):
        return self.tok.decode(self.ids, skip_special_tokens=True)

    def text(self):
        return self.decoded()[self.skip:]

    def end(self):
        if not self.ended:
            print(self.text()[len(self.shown):], flush=True)
            self.ended = True


def record(a):
    """Runs the recording; returns the process's exit status."""
    global RECORDER
    prompt = read_prompt(a)
    kvscope_trace.check_output(a.out)  # before the model loads and the prompt runs
    model, tok = load(a)
    cfg = model.config.get_text_config()
    text, ids = encode_prompt(a, tok, prompt)
    P, L, H = len(ids), cfg.num_hidden_layers, cfg.num_attention_heads
    context = getattr(cfg, "max_position_embeddings", None)
    if context and P + a.steps > context:
        raise RecordError(f"prompt: {P} tokens + {a.steps} steps exceed the model's context of {context} tokens")
    plan = kvscope_trace.capture_plan(L, H, P, a.capture_budget_mb << 20)
    rec = RECORDER = Recorder(L, H, P, plan, a.decode_dtype)
    ends = end_ids(model, tok)
    devices = {p.device.type for p in model.parameters()}
    device = "cuda" if "cuda" in devices else "cpu"
    dtype_name = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}.get(model.dtype,
                                                                                           str(model.dtype))
    params = inspect.signature(model.forward).parameters
    cache_arg = "cache" if "cache" in params else "past_key_values"  # transformers 5.24 renamed it
    forward_kw = {"use_cache": True}
    if "logits_to_keep" in params:
        forward_kw["logits_to_keep"] = 1  # the prompt's last position only
    in_device = model.get_input_embeddings().weight.device
    t0 = time.monotonic()
    writer, steps_done, cancelled = None, 0, False
    stream = TextStream(tok, a.quiet, text if a.chat else tok.decode(ids, skip_special_tokens=True), ids[-1])
    try:
        with torch.inference_mode():
            rec.begin_prefill()
            out = model(input_ids=torch.tensor([ids], device=in_device), **forward_kw)
            evidence = rec.prefill_evidence()
            t_prefill = time.monotonic()
            model_path = os.path.realpath(a.model) if os.path.exists(a.model) else a.model  # else a hub name
            writer = kvscope_trace.TraceWriter(
                a.out, a.steps, writer_version=f"{VERSION} (transformers {transformers.__version__}, "
                f"torch {torch.__version__})", model=os.path.basename(os.path.normpath(a.model)),
                model_path=model_path, tokenizer_path=os.path.realpath(a.tokenizer) if a.tokenizer else "",
                arch=ARCH_NAMES.get(cfg.model_type, cfg.model_type), device=device, device_dtype=dtype_name,
                n_layers=L, n_heads=H, n_kv_heads=rec.Hkv, head_dim=rec.head_dim, vocab_size=cfg.vocab_size,
                prompt_len=P, prompt=text, decode_dtype=a.decode_dtype, capture_note=plan.note)
            writer.write_prefill(**evidence)
            del evidence
            try:
                cache = getattr(out, cache_arg)
                for s in range(a.steps):
                    token = int(out.logits[0, -1].argmax())  # ties: the lowest id, as KVScope
                    if token in ends:
                        break
                    ids.append(token)
                    stream.add(token)
                    rec.begin_step(P + s)
                    out = model(input_ids=torch.tensor([[token]], device=in_device), use_cache=True,
                                **{cache_arg: cache})
                    cache = getattr(out, cache_arg)
                    writer.append_step(*rec.step_rows())
                    steps_done += 1
            except KeyboardInterrupt:
                cancelled = True
                if steps_done == 0:
                    raise
            t_decode = time.monotonic()
            notes = [plan.note] if plan.note else []
            if cancelled:
                notes.append(f"cancelled: the trace keeps the {steps_done} of {a.steps} steps recorded")
            elif steps_done == 0:
                raise RecordError("prompt: the model ended the text at once (end-of-text or begin-of-text as its "
                                  "first token): no decode step to record")
            elif steps_done < a.steps:
                notes.append(f"the model ended the text (end-of-text or begin-of-text token) after {steps_done} "
                             f"of {a.steps} steps")
            kept = ids[:P + steps_done]
            writer.commit(kept, token_texts(tok, kept), capture_note="; ".join(notes))
    except BaseException:
        if writer is not None:
            writer.abort()
        raise
    finally:
        RECORDER = None
        stream.end()  # the text's line, ended before a message on stderr
    t_end = time.monotonic()
    if not a.quiet:
        # The first step's token comes from the prefill's logits: the decode time covers the others.
        rate = f" at {(steps_done - 1) / (t_decode - t_prefill):.1f} tok/s" if steps_done > 1 else ""
        note = writer.meta["capture_note"]
        print(f"hf_record: {P} prompt tokens in {t_prefill - t0:.2f} s ({P / (t_prefill - t0):.0f} tok/s) + "
              f"{steps_done} steps{rate}, {t_end - t0:.2f} s in all on {device}, {dtype_name}; trace {a.out}"
              f"{'; ' + note if note else ''}", file=sys.stderr)
    return 130 if cancelled else 0


def main(argv=None):
    a = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        return record(a)
    except (RecordError, kvscope_trace.TraceError) as e:
        fail(str(e))
    except KeyboardInterrupt:
        print("hf_record: interrupted before the first step; no trace written", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
