// Reader for SentencePiece .model files (tokenizer.model, tok512.model): the protobuf ModelProto
// SentencePiece's trainer writes, read for its pieces, scores and types, the special token ids
// and the normalizer's flags, into the same SentencePiece-style BPE tokenizer as llama2.c's
// tokenizer.bin and GGUF "llama" vocabularies.
#pragma once
#include <memory>
#include <string>

#include "inference/tokenizer_spm.h"

namespace kvs {

// Throws InputError naming the file when it is not a ModelProto (truncated, another format),
// holds no pieces, or asks for what the tokenizer does not do: a unigram, word or char model
// (BPE only), or a normalization other than identity and NFKC.
std::unique_ptr<SpmTokenizer> load_sentencepiece_model(const std::string& path);

}  // namespace kvs
