// Reader for llama2.c tokenizer.bin files (max_token_length, then per token: score, length, bytes).
#pragma once
#include <memory>
#include <string>

#include "inference/tokenizer_spm.h"

namespace kvs {

// Reads a llama2.c tokenizer.bin into a SentencePiece-style tokenizer (spaces stored as " " in the
// file become "▁"; ids 0/1/2 are <unk>/<s>/</s>). Reads tokens until the end of the file; throws
// InputError when the file is truncated or malformed.
std::unique_ptr<SpmTokenizer> load_llama2c_tokenizer(const std::string& path);

}  // namespace kvs
