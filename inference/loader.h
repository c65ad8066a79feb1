// Entry points that open model and tokenizer files of any supported format.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "inference/model.h"
#include "inference/tokenizer.h"

namespace kvs {

// Loads a model from a llama2.c .bin, a GGUF file, or a Hugging Face folder. Quantized weights are
// dequantized to fp32. Throws InputError ("<path>: <problem>") on bad input. ConfigOnly: the same
// checks of the file and its configuration, no weights read (ModelParts).
Model load_model(const std::string& path, ModelParts parts = ModelParts::All);

// A tokenizer file alone, by its format: tokenizer.json (or a folder holding one), a
// SentencePiece .model, a GGUF file's metadata (a vocab-only GGUF included), else a llama2.c
// tokenizer.bin. Throws InputError naming the file.
std::unique_ptr<Tokenizer> load_tokenizer_file(const std::string& path);

// Loads the tokenizer for a model: `tokenizer_path` when given (llama2.c tokenizer.bin,
// tokenizer.json or a SentencePiece .model), else the GGUF metadata, the HF folder's
// tokenizer.json (or tokenizer.model), or a llama2.c
// tokenizer beside the .bin (tokenizer.bin / tok<vocab>.bin). Checks that its vocabulary size
// matches `model` and throws InputError naming the tokenizer file otherwise.
std::unique_ptr<Tokenizer> load_tokenizer(const Model& model, const std::string& tokenizer_path);

// The tokens that end a generated text: the tokenizer's EOS, its BOS (a generated BOS begins
// another text; llama2.c's run.c stops there, and stories260K emits one between stories), the
// model's own end tokens (ModelConfig::end_ids), and the end-of-text and end-of-turn markers
// llama.cpp also stops at ("<|endoftext|>", "<|im_end|>", "<|eot_id|>", "<end_of_turn>", ...)
// where the vocabulary holds one as a token of its own (a GGUF file converted before its
// end-of-turn id was recorded ran past "<|eot_id|>"); sorted, without repeats.
std::vector<int> text_end_ids(const Model& model, const Tokenizer& tokenizer);
// The same from the model's end tokens.
std::vector<int> text_end_ids(const std::vector<int>& model_end_ids, const Tokenizer& tokenizer);

// Locates the default model (SmolLM2-135M-Instruct GGUF) in the cache folder
// ($KVSCOPE_CACHE or ~/.cache/kvscope/models). Returns "" when absent.
std::string default_model_path();

}  // namespace kvs
