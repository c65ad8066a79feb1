// Tokenizer built from a GGUF file's tokenizer.ggml.* metadata: "llama" (SentencePiece-style BPE)
// or "gpt2" (byte-level BPE with the pre-tokenizer named by tokenizer.ggml.pre).
#pragma once
#include <memory>
#include <string>

#include "inference/gguf_file.h"
#include "inference/tokenizer.h"

namespace kvs {

// Throws InputError naming the file when the metadata lacks a vocabulary or names an unsupported
// tokenizer model or pre-tokenizer.
std::unique_ptr<Tokenizer> load_gguf_tokenizer(const GgufFile& gguf);
std::unique_ptr<Tokenizer> load_gguf_tokenizer(const std::string& path);

}  // namespace kvs
