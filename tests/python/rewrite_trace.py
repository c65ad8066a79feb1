#!/usr/bin/env python3
"""Rewrites a KVScope trace through scripts/kvscope_trace.py (the reference Python writer): reads every
array and root attribute of IN with h5py and writes them to OUT, decode steps one at a time, so that a
test can check that KVScope reads OUT as it reads IN (tests/analysis/h5py_writer_test.cpp). The trace's
/runs, /heads and /layers are left out (the writer writes what an exporter records). Prints OK.

usage: rewrite_trace.py IN OUT
"""
import os
import sys

import h5py

sys.dont_write_bytecode = True  # no __pycache__ in scripts/ from this import
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import kvscope_trace  # noqa: E402

# Root attributes the writer sets itself.
DERIVED = {"format", "schema_version", "n_steps", "has_prefill_map", "complete"}


def rewrite(src, dst):
    with h5py.File(src, "r") as f:
        a = f.attrs
        meta = {k: (v if isinstance(v, str) else v.item()) for k, v in a.items() if k not in DERIVED}
        n = int(a["n_steps"])
        att = f["attention"]
        with kvscope_trace.TraceWriter(dst, n, **meta) as w:
            window = att["prefill_window"]
            pooled = att.get("prefill_pooled")
            w.write_prefill(att["prefill_colsum"][...], window[...], att["prefill_window_lse"][...],
                            full_map=att["prefill"][...] if "prefill" in att else None,
                            pooled=None if pooled is None else pooled[...],
                            pool_block=0 if pooled is None else int(pooled.attrs["block"]))
            qpos = att["decode_query_pos"][...]
            for s in range(n):  # one step at a time, as an exporter appends them
                w.append_step(att["decode"][s], att["decode_lse"][s], int(qpos[s]))
            w.commit(f["tokens/ids"][...], f["tokens/text"].asstr()[...])
    if any(name.startswith(os.path.basename(dst) + ".tmp-") for name in os.listdir(os.path.dirname(dst) or ".")):
        raise AssertionError("a temporary file was left beside the trace")


def main():
    try:
        rewrite(sys.argv[1], sys.argv[2])
    except Exception as e:  # one line for the test's message
        print(f"FAIL: {type(e).__name__}: {e}")
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
