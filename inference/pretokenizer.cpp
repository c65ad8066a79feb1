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

namespace {

// Qwen3.5's: Qwen2's with combining marks (\p{M}) kept with the letters they follow.
const char* const kQwen35Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// DeepSeek LLM's tokenizer.json splits, in order: line breaks; a run of cased letters (Latin,
// Greek, Cyrillic, Armenian, Georgian, Cherokee, Glagolitic, Coptic, full-width Latin, Deseret,
// Osage, Old Hungarian, Warang Citi, Adlam and letter-like symbols) with the space before it; a
// run of ASCII, full-width and CJK punctuation with the space before it; trailing whitespace; a
// run of CJK ideographs (and U+0800..U+4E00) or Hangul; a run of digits.
const char* const kDeepSeekLlmLetters =
    R"(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293}\x{295}-\x{2AF})"
    R"(\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1})"
    R"(\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5})"
    R"(\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A})"
    R"(\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B})"
    R"(\x{1F5D}\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC})"
    R"(\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107})"
    R"(\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134})"
    R"(\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4})"
    R"(\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787})"
    R"(\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A})"
    R"(\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2})"
    R"(\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+)";
const char* const kDeepSeekLlmPunctuation = R"(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)";
const char* const kDeepSeekCjk = R"([\x{4E00}-\x{9FA5}\x{800}-\x{4E00}\x{AC00}-\x{D7FF}]+)";

// GPT-2's expression without its last alternative: whitespace that \s+(?!\S) leaves is left
// between matches, where it is a piece anyway.
const char* const kGpt2NoTrailingSpacePattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";

}  // namespace

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
      name == "jais" || name == "exaone4") {  // llama.cpp splits EXAONE 4's text as GPT-2's
    return {kGpt2Pattern};
  }
  if (name == "llama3" || name == "llama-bpe" || name == "llama-v3" || name == "dbrx" ||
      name == "smaug-bpe") {
    return {kLlama3Pattern};
  }
  if (name == "qwen2" || name == "deepseek-r1-qwen") return {kQwen2Pattern};
  if (name == "qwen35") return {kQwen35Pattern};
  if (name == "smollm" || name == "starcoder" || name == "refact" || name == "command-r") {
    return {R"(\p{N})", kGpt2Pattern};  // individual digits first
  }
  if (name == "mpt") return {kGpt2Pattern};  // GPT-NeoX's tokenizer (with NFC: gguf_tokenizer.cpp)
  if (name == "deepseek-llm") {
    return {R"([\r\n])", kDeepSeekLlmLetters, kDeepSeekLlmPunctuation, R"(\s+$)", kDeepSeekCjk, R"(\p{N}+)"};
  }
  if (name == "deepseek-coder") return {R"([\r\n])", R"(\s?\p{L}+)", R"(\s?\p{P}+)", kDeepSeekCjk, R"(\p{N})"};
  if (name == "falcon") {
    // Punctuation (Unicode's and ASCII's symbols) in runs, GPT-2's split, then digits in threes.
    return {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2NoTrailingSpacePattern, R"([0-9][0-9][0-9])"};
  }
  return {};
}

}  // namespace kvs
