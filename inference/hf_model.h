// Loader for Hugging Face model folders: config.json + model.safetensors (single file or shards
// listed in model.safetensors.index.json); LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM,
// Qwen3ForCausalLM, Phi3ForCausalLM, Gemma2ForCausalLM, Gemma3ForCausalLM and the language model of
// Gemma3ForConditionalGeneration.
#pragma once
#include <string>

#include "inference/model.h"

namespace kvs {

// Reads the configuration and converts the F32 / F16 / BF16 weights to fp32
// (RopeStyle::RotateHalf). Throws InputError naming the file (and tensor) for a config value of
// the wrong type or out of range, a missing shard, a shape that disagrees with config.json, an
// unsupported architecture or dtype, or a header that lies about offsets.
Model load_hf_model(const std::string& folder, ModelParts parts = ModelParts::All);

}  // namespace kvs
