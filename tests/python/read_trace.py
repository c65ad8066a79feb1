#!/usr/bin/env python3
"""Opens a KVScope trace with h5py alone, by the names docs/trace-format.md documents: checks
attributes, shapes, dtypes and that attention rows are distributions, then runs the document's
own h5py example on the file. Prints OK and exits 0 when everything holds.

usage: read_trace.py TRACE [DOC]   (DOC defaults to docs/trace-format.md beside this script)
"""
import os
import re
import sys

import h5py
import numpy as np


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def check_rows_sum_to_one(rows, tol, what):
    sums = rows.astype(np.float64).sum(axis=-1)
    check(np.all(np.abs(sums - 1.0) <= tol), f"{what}: rows sum to {sums.min()}..{sums.max()}")


def check_trace(path):
    with h5py.File(path, "r") as f:
        a = f.attrs
        check(a["format"] == "kvscope-trace", "format attribute")
        check(int(a["schema_version"]) == 1, "schema_version")
        check(int(a["complete"]) == 1, "complete")
        L, H, Hkv = int(a["n_layers"]), int(a["n_heads"]), int(a["n_kv_heads"])
        P, n = int(a["prompt_len"]), int(a["n_steps"])
        T = P + n
        for name in ("model", "model_path", "arch", "device", "prompt", "decode_dtype", "created"):
            check(isinstance(a[name], str), f"attribute {name} is a str")

        ids = f["tokens/ids"]
        check(ids.dtype == np.int32 and ids.shape == (T,), f"tokens/ids {ids.dtype} {ids.shape}")
        text = f["tokens/text"].asstr()[:]
        check(len(text) == T and all(isinstance(t, str) for t in text), "tokens/text")

        dec = f["attention/decode"]
        want = np.float16 if a["decode_dtype"] == "float16" else np.float32
        check(dec.dtype == want, f"attention/decode dtype {dec.dtype}, expected {want}")
        check(dec.shape == (n, L, H, T), f"attention/decode shape {dec.shape}")
        qpos = f["attention/decode_query_pos"][:]
        check(qpos.dtype == np.int32 and np.array_equal(qpos, P + np.arange(n)), "decode_query_pos")
        check(f["attention/decode_lse"].shape == (n, L, H), "decode_lse shape")
        tol = 5e-3 if want == np.float16 else 1e-5
        for s in range(n):
            rows = dec[s]
            check_rows_sum_to_one(rows, tol, f"decode step {s}")
            check(np.all(rows[..., qpos[s] + 1:] == 0), f"decode step {s} has weight past its query")

        colsum = f["attention/prefill_colsum"]
        check(colsum.dtype == np.float32 and colsum.shape == (L, H, P), "prefill_colsum")
        check(np.allclose(colsum[:].sum(axis=-1), P, rtol=1e-5), "each prompt row adds 1 to the column sums")
        win = f["attention/prefill_window"]
        W = int(win.attrs["window"])
        check(win.dtype == np.float32 and win.shape == (L, H, W, P) and 1 <= W <= P, "prefill_window")
        check_rows_sum_to_one(win[:], 1e-5, "prefill_window")
        check(f["attention/prefill_window_lse"].shape == (L, H, W), "prefill_window_lse")
        if int(a["has_prefill_map"]):
            full = f["attention/prefill"]
            check(full.dtype == np.float16 and full.shape == (L, H, P, P), "prefill map")
            m = full[:].astype(np.float64)
            check_rows_sum_to_one(m, 5e-3, "prefill map")
            check(np.allclose(m.sum(axis=2), colsum[:], atol=5e-3 * P), "column sums match the map")
            check(np.allclose(m[:, :, P - W:, :], win[:], atol=1e-3), "window rows match the map")
            check("attention/prefill_pooled" not in f, "no pooled map beside the full map")
        else:
            check("attention/prefill" not in f, "no prefill map when has_prefill_map is 0")
            pooled = f["attention/prefill_pooled"]
            b = int(pooled.attrs["block"])
            nb = -(-P // b)
            check(pooled.dtype == np.float32 and pooled.shape == (L, H, nb, nb), "prefill_pooled shape")
            pm = pooled[:].astype(np.float64)
            check_rows_sum_to_one(pm, 1e-5, "prefill_pooled")
            # Column sums pooled over key blocks = pooled cells weighted by their rows' query counts.
            rows_in = np.minimum(b, P - b * np.arange(nb))
            by_keys = np.add.reduceat(colsum[:].astype(np.float64), np.arange(0, P, b), axis=-1)
            check(np.allclose((pm * rows_in[:, None]).sum(axis=2), by_keys, atol=1e-4), "pooled map matches column sums")
            check(np.all(np.triu(pm, 1) == 0), "pooled map is causal")


def run_doc_example(path, doc):
    with open(doc, encoding="utf-8") as fh:
        blocks = re.findall(r"```python\n(.*?)```", fh.read(), re.S)
    check(blocks, f"{doc} has a python example")
    code = blocks[0].replace('"trace.h5"', repr(path))
    exec(compile(code, doc, "exec"), {})


def main():
    path = sys.argv[1]
    here = os.path.dirname(os.path.abspath(__file__))
    doc = sys.argv[2] if len(sys.argv) > 2 else os.path.join(here, "..", "..", "docs", "trace-format.md")
    try:
        check_trace(path)
        run_doc_example(path, doc)
    except Exception as e:  # report any failure as one line
        print(f"FAIL: {type(e).__name__}: {e}")
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
