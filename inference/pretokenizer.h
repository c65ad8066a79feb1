// Regex pre-tokenizers of byte-level BPE vocabularies (GPT-2, Llama-3, Qwen2, SmolLM, DeepSeek,
// Falcon, ...), run with PCRE2 in UTF + UCP mode. Each pattern splits every piece further; both the
// matches and the text between them become pieces (Hugging Face's "Isolated" split behaviour).
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kvs {

extern const char* const kGpt2Pattern;
extern const char* const kLlama3Pattern;
extern const char* const kQwen2Pattern;

class PreTokenizer {
 public:
  // Compiles `patterns`; throws InputError("<source>: ...") when one does not compile.
  PreTokenizer(std::vector<std::string> patterns, const std::string& source);
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  std::vector<std::string_view> split(std::string_view text) const;
  const std::vector<std::string>& patterns() const { return patterns_; }

 private:
  struct Compiled;
  std::vector<std::string> patterns_;
  std::vector<std::unique_ptr<Compiled>> compiled_;
};

// Patterns for a GGUF tokenizer.ggml.pre name ("gpt2"/"default", "llama3"/"llama-bpe",
// "qwen2", "qwen35", "smollm", "deepseek-llm", "deepseek-coder", "falcon", "mpt", "command-r", ...);
// empty when the name is unknown.
std::vector<std::string> pretokenizer_patterns(const std::string& name);

}  // namespace kvs
