"""Reference Python writer of KVScope traces (docs/trace-format.md, schema version 1), h5py and numpy only.

For exporters from other engines (scripts/hf_record.py: HF transformers): KVScope opens what it writes.

    plan = capture_plan(L, H, P)                      # full map or pooled blocks, as KVScope decides
    with TraceWriter("out.h5", max_steps, n_layers=L, n_heads=H, n_kv_heads=Hkv, head_dim=D,
                     prompt_len=P, model="m", decode_dtype="float16") as w:
        w.write_prefill(colsum, window_rows, window_lse, full_map=..., or pooled=..., pool_block=plan.pool_block)
        for s in range(n):
            w.append_step(rows, lse)                  # [L, H, >= P+s+1], [L, H]; written at once
        w.commit(ids, [token_text(b) for b in token_bytes])

The file is written under a temporary sibling name and renamed over the final name by commit(), so a
killed export never leaves a half trace there; leaving the `with` block without commit() (an exception)
removes it. Decode steps are written as they are appended (nothing is held between steps).
"""
import codecs
import os
import secrets
import time
import zlib
from dataclasses import dataclass

import h5py
import numpy as np

SCHEMA_VERSION = 1
DEFAULT_CAPTURE_BUDGET = 256 << 20  # bytes of a float32 prefill map (kvscope record --capture-budget-mb 256)
DEFAULT_WINDOW = 64                 # prefill window rows W = min(64, P)
MAX_POOL_CELLS = 512                # pooled overview: at most this many cells per side
ROW_SUM_TOL = 1e-2                  # an attention row sums to 1 within this (the reader's check)
_SKIP_FILTERS = 0b11                # chunk filter mask: shuffle (filter 0) and deflate (filter 1) not applied
_DEFLATE_LEVEL = 1

_REQUIRED = object()
# Root attributes: name -> (kind, default). n_steps and has_prefill_map are set by the writer.
_ATTRS = {
    "writer_version": ("str", "kvscope_trace.py 1"), "created": ("str", None), "model": ("str", ""),
    "model_path": ("str", ""), "tokenizer_path": ("str", ""), "arch": ("str", ""), "device": ("str", "cpu"),
    "device_dtype": ("str", "fp32"), "n_layers": ("i32", _REQUIRED), "n_heads": ("i32", _REQUIRED),
    "n_kv_heads": ("i32", _REQUIRED), "head_dim": ("i32", _REQUIRED), "vocab_size": ("i32", 0),
    "prompt_len": ("i32", _REQUIRED), "prompt": ("str", ""), "temperature": ("f32", 0.0), "top_p": ("f32", 1.0),
    "seed": ("u64", 0), "decode_dtype": ("str", "float32"), "capture_note": ("str", ""),
}
_KIND = {"i32": np.int32, "f32": np.float32, "u64": np.uint64}


class TraceError(ValueError):
    """Refused input: a shape, value or file the trace cannot hold. The message names what and why."""


def size_text(nbytes):
    """'300.0 MiB', or '1.1 KiB' below a tenth of a MiB (the wording of KVScope's capture_note)."""
    mib = nbytes / (1024.0 * 1024.0)
    return f"{mib:.1f} MiB" if mib >= 0.1 else f"{nbytes / 1024.0:.1f} KiB"


def pool_block_for(P, L, H, budget_bytes):
    """The smallest block whose pooled map has at most MAX_POOL_CELLS cells per side and fits budget_bytes
    in float32 over all L x H heads (analysis/prefill_evidence.cpp, pool_block_for)."""
    block = 1
    while block < P:
        nb = -(-P // block)
        if nb <= MAX_POOL_CELLS and L * H * nb * nb * 4 <= budget_bytes:
            break
        block += 1
    return block


@dataclass
class CapturePlan:
    window: int       # W = min(window, P)
    full_map: bool    # store /attention/prefill
    pool_block: int   # block of /attention/prefill_pooled; 0 with the full map
    note: str         # capture_note: why the map was reduced ("" when kept)


def capture_plan(L, H, P, budget_bytes=DEFAULT_CAPTURE_BUDGET, window=DEFAULT_WINDOW):
    """What of the prompt's attention a recording keeps, as KVScope's recorder decides: the full map when
    its L*H*P*P float32 bytes fit the budget, else the map pooled in blocks fitting a quarter of it."""
    W = min(window, P)
    map_bytes = L * H * P * P * 4
    if map_bytes <= budget_bytes:
        return CapturePlan(W, True, 0, "")
    block = pool_block_for(P, L, H, budget_bytes // 4)
    note = (f"prefill map of {size_text(map_bytes)} exceeds the capture budget of {size_text(budget_bytes)}; "
            f"kept column sums, the last {W} rows and the map pooled in {block} x {block} blocks")
    return CapturePlan(W, False, block, note)


def _hex_escapes(err):
    """A codecs error handler: each byte of an ill-formed stretch as the 4-character text \\xNN."""
    return "".join(f"\\x{b:02X}" for b in err.object[err.start:err.end]), err.end


codecs.register_error("kvscope_hex", _hex_escapes)


def token_text(data):
    """A token's bytes as /tokens/text holds them: characters where the bytes are valid UTF-8 (Python's strict
    decoder: no overlong forms or surrogates), the 4-character escape text \\xNN (hex in capitals) for each
    byte that is not and for NUL."""
    return data.decode("utf-8", "kvscope_hex").replace("\0", "\\x00")


def _shuffle_deflate(raw, elem):
    """The HDF5 shuffle + deflate filters' output for a chunk of `elem`-byte values."""
    planes = np.frombuffer(raw, dtype=np.uint8).reshape(-1, elem).T
    return zlib.compress(planes.tobytes(), _DEFLATE_LEVEL)


def _float_array(a, shape, what):
    """a as a finite float array of exactly `shape` (float16 kept as it is, anything else float32)."""
    a = np.asarray(a)
    if a.shape != tuple(shape):
        raise TraceError(f"{what} has shape {list(a.shape)}, expected {list(shape)}")
    if a.dtype != np.float16:
        a = a.astype(np.float32, copy=False)
    if not np.isfinite(a).all():
        raise TraceError(f"{what} holds a value that is not finite")
    return a


def _check_rows(rows, what):
    """rows [..., K]: attention distributions (values in [0, 1], each row summing to 1)."""
    if rows.size and (rows.min() < 0 or rows.max() > 1 + 1e-3):
        raise TraceError(f"{what} holds values outside [0, 1] (not attention probabilities)")
    sums = rows.sum(axis=-1, dtype=np.float64)
    bad = np.abs(sums - 1) > ROW_SUM_TOL
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise TraceError(f"{what}: row {list(where)} sums to {sums[where]:.6f}, not 1 (not an attention row)")


def _fsync_path(path, flags=os.O_RDONLY):
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def check_output(path):
    """Returns the file a trace at `path` is written to (through a symbolic link: the file it leads to);
    TraceError unless its folder is writable and it is absent, empty or an HDF5 file (nothing else is replaced).
    Exporters call it before their work; TraceWriter calls it again."""
    target = os.path.realpath(os.path.abspath(path))
    if os.path.lexists(target):
        if not os.path.isfile(target):
            raise TraceError(f"{path}: exists and is not a regular file; not replacing it")
        if os.path.getsize(target) and not h5py.is_hdf5(target):
            raise TraceError(f"{path}: exists and is not an HDF5 trace; not replacing it")
    folder = os.path.dirname(target)
    if not os.path.isdir(folder):
        raise TraceError(f"{path}: cannot create trace (no folder {folder})")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise TraceError(f"{path}: cannot create trace (folder {folder} is not writable)")
    return target


class TraceWriter:
    """Writes one trace: write_prefill() once, append_step() per decode step in order, then commit()."""

    def __init__(self, path, max_steps, **meta):
        unknown = sorted(set(meta) - set(_ATTRS))
        if unknown:
            raise TraceError(f"unknown root attribute(s) {', '.join(unknown)} (known: {', '.join(_ATTRS)})")
        self.meta = {}
        for name, (kind, default) in _ATTRS.items():
            value = meta.get(name, default)
            if value is _REQUIRED:
                raise TraceError(f"root attribute {name} is required")
            if kind == "str":
                value = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()) if value is None else value
                if not isinstance(value, str) or "\0" in value:
                    raise TraceError(f"root attribute {name} must be a str without NUL, not {value!r}")
            self.meta[name] = value
        m = self.meta
        self.L, self.H, self.Hkv, self.P = (int(m[k]) for k in ("n_layers", "n_heads", "n_kv_heads", "prompt_len"))
        if min(self.L, self.H, self.Hkv, int(m["head_dim"])) < 1 or self.H % self.Hkv:
            raise TraceError(f"invalid model shape: {self.L} layers, {self.H} heads, {self.Hkv} KV heads "
                             f"(a divisor of the heads), head_dim {m['head_dim']}")
        if self.P < 1 or int(max_steps) < 0:
            raise TraceError(f"invalid prompt_len {self.P} or max_steps {max_steps}")
        if m["decode_dtype"] not in ("float32", "float16"):
            raise TraceError(f"decode_dtype must be float32 or float16, not {m['decode_dtype']!r}")
        self.max_steps = int(max_steps)
        self.T_alloc = self.P + max(self.max_steps, 1)  # the widest decode row: one chunk's width
        self.dtype = np.float16 if m["decode_dtype"] == "float16" else np.float32
        if self.H * self.T_alloc * np.dtype(self.dtype).itemsize >= 4 << 30:
            raise TraceError(f"one layer's decode rows ({self.H} heads x {self.T_alloc} keys) exceed HDF5's 4 GiB "
                             "chunk limit; record fewer steps")
        self.qpos = []
        self.row_len = self.P
        self.has_prefill = False
        self.final = os.path.abspath(path)
        self.target = check_output(path)
        self.temp = f"{self.target}.tmp-{os.getpid()}-{secrets.token_hex(4)}"
        try:
            self.file = h5py.File(self.temp, "x")
        except OSError as e:
            raise TraceError(f"{path}: cannot create trace ({e})") from None
        try:
            self._create_decode()
        except BaseException:
            self.abort()
            raise

    def _create_decode(self):
        L, H, f = self.L, self.H, self.file
        self.decode = f.create_dataset("attention/decode", shape=(0, L, H, self.P), maxshape=(None, L, H, None),
                                       chunks=(1, 1, H, self.T_alloc), dtype=self.dtype, shuffle=True,
                                       compression="gzip", compression_opts=_DEFLATE_LEVEL)
        self.lse = f.create_dataset("attention/decode_lse", shape=(0, L, H), maxshape=(None, L, H),
                                    chunks=(16, L, H), dtype=np.float32, shuffle=True, compression="gzip",
                                    compression_opts=_DEFLATE_LEVEL)
        self.query_pos = f.create_dataset("attention/decode_query_pos", shape=(0,), maxshape=(None,),
                                          chunks=(256,), dtype=np.int32, shuffle=True, compression="gzip",
                                          compression_opts=_DEFLATE_LEVEL)

    def __enter__(self):
        return self

    def __exit__(self, kind, value, tb):
        if self.temp is not None:
            self.abort()
        return False

    def abort(self):
        """Closes and removes the temporary file; the final name is left as it was."""
        if self.file is not None:
            self.file.close()
            self.file = None
        if self.temp is not None and os.path.exists(self.temp):
            os.remove(self.temp)
        self.temp = None

    def _live(self):
        if self.file is None:
            raise TraceError("the trace writer is closed (committed or aborted)")

    def _head_chunked(self, name, data, dtype, pack):
        """Dataset [L, H, R, C], one chunk per (layer, head): shuffle + deflate, or stored as it is."""
        L, H, R, C = data.shape
        filters = dict(shuffle=True, compression="gzip", compression_opts=_DEFLATE_LEVEL) if pack else {}
        ds = self.file.create_dataset(name, shape=data.shape, chunks=(1, 1, R, C), dtype=dtype, **filters)
        for l in range(L):
            ds[l] = data[l]
        return ds

    def write_prefill(self, colsum, window_rows, window_lse, full_map=None, pooled=None, pool_block=0,
                      key_scores=None):
        """The prompt's evidence: colsum [L, H, P], window_rows [L, H, W, P] (queries P-W..P-1), window_lse
        [L, H, W]; at most one of full_map [L, H, P, P] (stored float16) and pooled [L, H, nb, nb] with
        nb = ceil(P / pool_block); key_scores [L, Hkv, P] optional (KVzip)."""
        self._live()
        if self.has_prefill:
            raise TraceError("write_prefill() was already called")
        L, H, P = self.L, self.H, self.P
        window_rows = np.asarray(window_rows)
        if window_rows.ndim != 4 or not 1 <= window_rows.shape[2] <= P:
            raise TraceError(f"prefill window rows have shape {list(window_rows.shape)}, expected [{L},{H},W,{P}] "
                             f"with 1 <= W <= {P}")
        W = window_rows.shape[2]
        colsum = _float_array(colsum, (L, H, P), "prefill column sums").astype(np.float32)
        window_rows = _float_array(window_rows, (L, H, W, P), "prefill window rows").astype(np.float32)
        window_lse = _float_array(window_lse, (L, H, W), "prefill window lse").astype(np.float32)
        _check_rows(window_rows, "prefill window")
        if np.any(np.triu(window_rows, P - W + 1)):
            raise TraceError("prefill window rows have weight past their query's position")
        if full_map is not None and pooled is not None:
            raise TraceError("give the full prefill map or the pooled one, not both")
        f = self.file
        f.create_dataset("attention/prefill_colsum", data=colsum)
        self._head_chunked("attention/prefill_window", window_rows, np.float32, False).attrs["window"] = np.int32(W)
        f.create_dataset("attention/prefill_window_lse", data=window_lse)
        if key_scores is not None:
            f.create_dataset("attention/prefill_key_scores",
                             data=_float_array(key_scores, (L, self.Hkv, P), "prefill key scores").astype(np.float32))
        if full_map is not None:
            full_map = _float_array(full_map, (L, H, P, P), "prefill map")
            _check_rows(full_map, "prefill map")
            self._head_chunked("attention/prefill", full_map.astype(np.float16, copy=False), np.float16, True)
        if pooled is not None:
            if int(pool_block) < 1:
                raise TraceError(f"pool_block {pool_block} must be at least 1 with a pooled map")
            nb = -(-P // int(pool_block))
            pooled = _float_array(pooled, (L, H, nb, nb), f"pooled prefill map (block {pool_block})")
            _check_rows(pooled, "pooled prefill map")
            ds = self._head_chunked("attention/prefill_pooled", pooled.astype(np.float32), np.float32, True)
            ds.attrs["block"] = np.int32(pool_block)
        self.has_prefill = True

    def append_step(self, rows, lse, query_pos=None):
        """Decode step s = steps written so far: rows [L, H, K] with query_pos < K <= P + max_steps (softmax
        over keys 0..query_pos, zeros after it), lse [L, H]; query_pos defaults to P + s."""
        self._live()
        s = len(self.qpos)
        q = self.P + s if query_pos is None else int(query_pos)
        if s >= self.max_steps:
            raise TraceError(f"decode step {s} exceeds max_steps {self.max_steps}")
        if not self.P <= q < self.T_alloc:
            raise TraceError(f"decode step {s}: query position {q} is outside {self.P}..{self.T_alloc - 1}")
        rows = np.asarray(rows)
        if rows.ndim != 3 or rows.shape[:2] != (self.L, self.H) or not q < rows.shape[2] <= self.T_alloc:
            raise TraceError(f"decode step {s}: rows have shape {list(rows.shape)}, expected "
                             f"[{self.L},{self.H},K] with {q} < K <= {self.T_alloc}")
        rows = _float_array(rows, rows.shape, f"decode step {s} rows")
        lse = _float_array(lse, (self.L, self.H), f"decode step {s} lse").astype(np.float32)
        _check_rows(rows[:, :, :q + 1], f"decode step {s}")
        if np.any(rows[:, :, q + 1:]):
            raise TraceError(f"decode step {s} has weight past its query position {q}")
        elem = np.dtype(self.dtype).itemsize
        # float32 chunks at least half full are stored unfiltered (deflate saves ~14% of them at ~110 MB/s),
        # float16 ones and those mostly of zeros packed (docs/trace-format.md).
        pack = elem == 2 or 2 * (q + 1) < self.T_alloc
        self.row_len = max(self.row_len, q + 1)
        self.decode.resize((s + 1, self.L, self.H, self.row_len))
        chunk = np.zeros((self.H, self.T_alloc), dtype=self.dtype)
        for l in range(self.L):
            chunk[:, :rows.shape[2]] = rows[l]
            raw = chunk.tobytes()
            data, mask = (_shuffle_deflate(raw, elem), 0) if pack else (raw, _SKIP_FILTERS)
            self.decode.id.write_direct_chunk((s, l, 0, 0), data, mask)
        self.lse.resize((s + 1, self.L, self.H))
        self.lse[s] = lse
        self.query_pos.resize((s + 1,))
        self.query_pos[s] = q
        self.qpos.append(q)

    @property
    def n_steps(self):
        return len(self.qpos)

    def commit(self, ids, texts, capture_note=None):
        """Writes the tokens (ids [T] and each one's text, T = P + steps appended) and the root attributes,
        then publishes the file under its final name (fsync, rename, fsync of the folder). Returns the path."""
        self._live()
        n, T = len(self.qpos), self.P + len(self.qpos)
        ids = np.asarray(ids)
        if ids.shape != (T,) or not np.issubdtype(ids.dtype, np.integer):
            raise TraceError(f"token ids have shape {list(ids.shape)} ({ids.dtype}), expected [{T}] integers")
        if T and (ids.min() < 0 or ids.max() > np.iinfo(np.int32).max):
            raise TraceError("token ids must be in 0..2^31-1")
        texts = list(texts)
        if len(texts) != T:
            raise TraceError(f"{len(texts)} token texts for {T} tokens")
        for i, t in enumerate(texts):
            if not isinstance(t, str) or "\0" in t:
                raise TraceError(f"token text {i} must be a str without NUL (token_text() escapes it), not {t!r}")
        if any(q >= T for q in self.qpos):
            raise TraceError(f"a decode query position lies past the {T} tokens")
        if capture_note is not None:
            self.meta["capture_note"] = capture_note
        f = self.file
        self.decode.resize((n, self.L, self.H, T))
        f.create_dataset("tokens/ids", data=ids.astype(np.int32))
        f.create_dataset("tokens/text", data=texts, dtype=h5py.string_dtype("utf-8"))
        f.attrs["format"] = "kvscope-trace"
        f.attrs["schema_version"] = np.int32(SCHEMA_VERSION)
        for name, (kind, _) in _ATTRS.items():
            v = self.meta[name]
            f.attrs[name] = v if kind == "str" else _KIND[kind](v)
        f.attrs["n_steps"] = np.int32(n)
        f.attrs["has_prefill_map"] = np.int32("attention/prefill" in f)
        self.file.close()
        self.file = None
        _fsync_path(self.temp)
        os.replace(self.temp, self.target)
        self.temp = None
        _fsync_path(os.path.dirname(self.target), os.O_RDONLY | os.O_DIRECTORY)
        return self.final
