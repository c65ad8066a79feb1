#!/usr/bin/env python3
"""Compares two KVScope traces of the same model, prompt and steps recorded on two devices
(`kvscope record --device cpu` and `--device cuda`): the token ids must be equal; the attention
rows, prefill column sums and window rows are compared element by element and summarised (largest
difference, share of rows whose largest difference is within 1e-3). Exits 1 when the tokens
differ or a decode row differs by more than --tol, 0 otherwise. h5py and numpy only.

usage: compare_traces.py A.h5 B.h5 [--tol 1e-2]
"""
import argparse
import sys

import h5py
import numpy as np


def summarise(name, a, b, row_axis_sizes):
    """Largest |a - b|, and the share of rows (last axis) whose largest difference is <= 1e-3."""
    d = np.abs(a.astype(np.float64) - b.astype(np.float64))
    per_row = d.reshape(-1, d.shape[-1]).max(axis=1) if d.size else np.zeros(1)
    within = float(np.mean(per_row <= 1e-3)) if per_row.size else 1.0
    print(f"{name}: largest difference {per_row.max():.3g}; {100 * within:.2f}% of {per_row.size} rows "
          f"within 1e-3 ({row_axis_sizes})")
    return float(per_row.max())


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--tol", type=float, default=1e-2, help="largest decode-row difference allowed")
    args = p.parse_args()
    with h5py.File(args.a, "r") as fa, h5py.File(args.b, "r") as fb:
        for f, path in ((fa, args.a), (fb, args.b)):
            print(f"{path}: device {f.attrs['device']}"
                  + (f" ({f.attrs['device_dtype']})" if "device_dtype" in f.attrs else "")
                  + f", prompt {int(f.attrs['prompt_len'])} tokens, {int(f.attrs['n_steps'])} steps")
        ids_a, ids_b = fa["tokens/ids"][:], fb["tokens/ids"][:]
        if not np.array_equal(ids_a, ids_b):
            first = int(np.argmax(ids_a[: min(len(ids_a), len(ids_b))] != ids_b[: min(len(ids_a), len(ids_b))]))
            print(f"tokens differ (first at position {first}); rows not compared")
            return 1
        print(f"tokens: the same {len(ids_a)} ids")
        dec = summarise("decode rows", fa["attention/decode"][:], fb["attention/decode"][:], "step, layer, head")
        summarise("prefill column sums / prompt length", fa["attention/prefill_colsum"][:] / fa.attrs["prompt_len"],
                  fb["attention/prefill_colsum"][:] / fb.attrs["prompt_len"], "layer, head")
        summarise("prefill window rows", fa["attention/prefill_window"][:], fb["attention/prefill_window"][:],
                  "layer, head, query")
        if dec > args.tol:
            print(f"a decode row differs by {dec:.3g} > {args.tol}")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
