// Hugging Face tokenizer.json loader: BPE models, either SentencePiece-style (byte fallback,
// "▁" normalizer or Metaspace) or byte-level (ByteLevel / Split / Digits pre-tokenizers), plus
// added tokens; BOS/EOS from the post-processor and a sibling tokenizer_config.json.
#pragma once
#include <memory>
#include <string>

#include "inference/tokenizer.h"

namespace kvs {

// Throws InputError naming the file for malformed JSON or unsupported models, normalizers and
// pre-tokenizers.
std::unique_ptr<Tokenizer> load_tokenizer_json(const std::string& path);

}  // namespace kvs
