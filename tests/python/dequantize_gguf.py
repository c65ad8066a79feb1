"""Dequantizes every tensor of a GGUF file with the `gguf` package (llama.cpp's gguf-py, an
implementation independent of KVScope's) and writes each as raw float32 [elements] to
OUT_DIR/<tensor name>.f32, for the cross-check in tests/inference/gguf_py_quant_test.cpp.

usage: dequantize_gguf.py FILE.gguf OUT_DIR   (prints "OK <tensor count>")
"""
import sys

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize


def main() -> None:
    path, out_dir = sys.argv[1], sys.argv[2]
    reader = GGUFReader(path)
    for tensor in reader.tensors:
        values = dequantize(tensor.data, tensor.tensor_type).astype(np.float32, copy=False)
        values.astype("<f4").tofile(f"{out_dir}/{tensor.name}.f32")
    print("OK", len(reader.tensors))


if __name__ == "__main__":
    main()
