// PCRE2-based pre-tokenizer splitting, and the pattern table for GGUF pre-tokenizer names
// (the same expressions llama.cpp and Hugging Face tokenizers use).
#define PCRE2_CODE_UNIT_WIDTH 8
#include "inference/pretokenizer.h"

#include <pcre2.h>

#include "inference/bpe_merge.h"
#include "inference/errors.h"

namespace kvs {

const char* const kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
const char* const kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

struct PreTokenizer::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() { pcre2_code_free(code); }
};

PreTokenizer::PreTokenizer(std::vector<std::string> patterns, const std::string& source)
    : patterns_(std::move(patterns)) {
  for (const std::string& p : patterns_) {
    int err = 0;
    PCRE2_SIZE err_off = 0;
    auto c = std::make_unique<Compiled>();
    c->code =
        pcre2_compile(reinterpret_cast<PCRE2_SPTR>(p.data()), p.size(),
                      PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &err_off, nullptr);
    if (c->code == nullptr) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      throw input_error(source, "pre-tokenizer pattern does not compile at offset " +
                                    std::to_string(err_off) + ": " + reinterpret_cast<char*>(msg));
    }
    pcre2_jit_compile(c->code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter on failure
    compiled_.push_back(std::move(c));
  }
}

PreTokenizer::~PreTokenizer() = default;

std::vector<std::string_view> PreTokenizer::split(std::string_view text) const {
  std::vector<std::string_view> pieces;
  if (!text.empty()) pieces.push_back(text);
  for (const auto& c : compiled_) {
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(c->code, nullptr);
    std::vector<std::string_view> next;
    for (std::string_view piece : pieces) {
      const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
      std::size_t start = 0, gap = 0;  // search position; start of the unmatched gap
      while (start < piece.size()) {
        const int rc = pcre2_match(c->code, subject, piece.size(), start, 0, md, nullptr);
        if (rc < 0) break;  // no further match (or invalid UTF-8 tail): the rest is one gap
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
        if (ov[1] == ov[0]) {  // empty match: step one character and search again
          start = ov[0] + utf8_length(static_cast<unsigned char>(piece[ov[0]]));
          continue;
        }
        if (ov[0] > gap) next.push_back(piece.substr(gap, ov[0] - gap));
        next.push_back(piece.substr(ov[0], ov[1] - ov[0]));
        start = gap = ov[1];
      }
      if (gap < piece.size()) next.push_back(piece.substr(gap));
    }
    pcre2_match_data_free(md);
    pieces = std::move(next);
  }
  return pieces;
}

std::vector<std::string> pretokenizer_patterns(const std::string& name) {
  if (name == "gpt2" || name == "gpt-2" || name == "default" || name == "phi-2" || name == "olmo" ||
      name == "jais") {
    return {kGpt2Pattern};
  }
  if (name == "llama3" || name == "llama-bpe" || name == "llama-v3" || name == "dbrx" ||
      name == "smaug-bpe") {
    return {kLlama3Pattern};
  }
  if (name == "qwen2" || name == "deepseek-r1-qwen") return {kQwen2Pattern};
  if (name == "smollm" || name == "starcoder" || name == "refact") {
    return {R"(\p{N})", kGpt2Pattern};  // individual digits first
  }
  return {};
}

}  // namespace kvs
