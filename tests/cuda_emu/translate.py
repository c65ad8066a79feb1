#!/usr/bin/env python3
"""CUDA emulator (tests only): turns a .cu file into C++ for tests/cuda_emu — every kernel launch
`kernel<<<grid, block, smem, stream>>>(args)` (or `kernel<T><<<...>>>`) becomes
`::cuda_emu::launcher(kernel, grid, block, smem, stream)(args)`; every `__shared__` array
declaration is followed by `::cuda_emu::fresh_shared(name, sizeof name)`, which fills it with
NaN bytes once per block, as a block's shared memory holds no values of its own until it writes
them; and the device header comes first, as nvcc includes it implicitly.
Usage: translate.py IN.cu OUT.cpp"""
import os
import re
import sys

src = open(sys.argv[1]).read()
out, n = re.subn(r"([A-Za-z_][A-Za-z_0-9:]*(?:<[^<>;]*>)?)\s*<<<(.*?)>>>\s*\(", r"::cuda_emu::launcher(\1, \2)(", src, flags=re.S)
out, n_shared = re.subn(r"(__shared__[^;(]*?\b([A-Za-z_]\w*)\s*(?:\[[^;\]]*\]\s*)+;)",
                       r"\1 ::cuda_emu::fresh_shared(\2, sizeof \2);", out)
if "<<<" in out:
    sys.exit(f"{sys.argv[1]}: a kernel launch the translator does not understand")
with open(sys.argv[2], "w") as f:
    # The source named relative to the checkout, so that the output is the same in every clone (ccache).
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    name = os.path.relpath(os.path.abspath(sys.argv[1]), root)
    f.write(f"// Generated from {name} by tests/cuda_emu/translate.py ({n} launches, {n_shared} shared arrays).\n")
    f.write("#include <cuda_runtime.h>\n")
    f.write(out)
