// Loader for llama2.c checkpoints (.bin): a 7 x int32 header followed by fp32 weights.
#pragma once
#include <string>

#include "inference/model.h"

namespace kvs {

// Reads a llama2.c checkpoint. A negative vocab_size in the header means the classifier is
// stored separately after the RoPE tables. Throws InputError for a truncated file or a file
// whose header is not a plausible llama2.c header.
Model load_llama2c_model(const std::string& path, ModelParts parts = ModelParts::All);

}  // namespace kvs
