// Builds a Model from a GGUF file (architectures llama, qwen2, qwen3, phi3, gemma2 and gemma3),
// dequantizing to fp32.
#pragma once
#include <string>

#include "inference/model.h"

namespace kvs {

// Loads hyper-parameters from "<arch>.*" metadata and the token_embd / blk.N.* / output_norm /
// output tensors (output absent = tied classifier). Throws InputError naming the file (and key or
// tensor) for hyper-parameters of the wrong type or out of range, missing tensors, wrong shapes,
// unsupported tensor types or truncated data.
Model load_gguf_model(const std::string& path, ModelParts parts = ModelParts::All);

}  // namespace kvs
