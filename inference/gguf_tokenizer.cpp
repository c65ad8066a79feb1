// GGUF tokenizer metadata -> SpmTokenizer ("llama") or ByteLevelBpeTokenizer ("gpt2").
#include "inference/gguf_tokenizer.h"

#include "inference/errors.h"
#include "inference/tokenizer_bpe.h"
#include "inference/tokenizer_spm.h"

namespace kvs {
namespace {

const GgufValue& array_of(const GgufFile& g, const std::string& key, GgufType elem, std::size_t n) {
  const GgufValue* v = g.find(key);
  if (v == nullptr) throw input_error(g.path(), "missing metadata " + key);
  const bool numeric = elem != GgufType::String;
  const std::size_t have = numeric ? v->numbers.size() : v->strings.size();
  if (v->type != GgufType::Array || (numeric != (v->element_type != GgufType::String)) ||
      (n > 0 && have != n)) {
    throw input_error(g.path(), "metadata " + key + " is not an array of " + std::to_string(n) +
                                    (numeric ? " numbers" : " strings"));
  }
  return *v;
}

std::vector<int> token_types(const GgufFile& g, std::size_t n) {
  std::vector<int> types;
  if (g.find("tokenizer.ggml.token_type") == nullptr) return types;
  for (double t : array_of(g, "tokenizer.ggml.token_type", GgufType::Int32, n).numbers) {
    types.push_back(static_cast<int>(t));
  }
  return types;
}

std::unique_ptr<Tokenizer> spm_from_gguf(const GgufFile& g,
                                         const std::vector<std::string>& tokens) {
  SpmVocab v;
  v.pieces = tokens;
  if (g.find("tokenizer.ggml.scores") != nullptr) {
    for (double s :
         array_of(g, "tokenizer.ggml.scores", GgufType::Float32, tokens.size()).numbers) {
      v.scores.push_back(static_cast<float>(s));
    }
  }
  v.types = token_types(g, tokens.size());
  v.bos_id = static_cast<int>(g.get_int("tokenizer.ggml.bos_token_id", 1));
  v.eos_id = static_cast<int>(g.get_int("tokenizer.ggml.eos_token_id", 2));
  v.unk_id = static_cast<int>(g.get_int("tokenizer.ggml.unknown_token_id", 0));
  v.add_bos = g.get_bool("tokenizer.ggml.add_bos_token", true);
  v.add_space_prefix = g.get_bool("tokenizer.ggml.add_space_prefix", true);
  return std::make_unique<SpmTokenizer>(std::move(v));
}

std::unique_ptr<Tokenizer> bpe_from_gguf(const GgufFile& g,
                                         const std::vector<std::string>& tokens) {
  BpeVocab v;
  v.source = g.path();
  v.tokens = tokens;
  v.types = token_types(g, tokens.size());
  for (const std::string& m : array_of(g, "tokenizer.ggml.merges", GgufType::String, 0).strings) {
    const std::size_t space = m.find(' ', 1);
    if (space == std::string::npos) {
      throw input_error(g.path(), "merge \"" + m + "\" in tokenizer.ggml.merges has no space");
    }
    v.merges.emplace_back(m.substr(0, space), m.substr(space + 1));
  }
  for (std::size_t i = 0; i < v.types.size(); ++i) {
    if (v.types[i] == kTokenControl || v.types[i] == kTokenUserDefined) {
      v.specials.emplace_back(tokens[i], static_cast<int>(i));
    }
  }
  v.pre_name = g.get_string("tokenizer.ggml.pre", "default");
  v.pre_patterns = pretokenizer_patterns(v.pre_name);
  if (v.pre_patterns.empty()) {
    throw input_error(g.path(),
                      "unsupported pre-tokenizer \"" + v.pre_name + "\" (tokenizer.ggml.pre)");
  }
  v.ignore_merges = v.pre_name == "llama3" || v.pre_name == "llama-bpe" || v.pre_name == "llama-v3";
  // Qwen2's tokenizer.json composes text to NFC before splitting it, which GGUF's metadata does not
  // record: "e" + U+0301 is one token there, "é". So do GPT-NeoX's (MPT's) and Command-R's; Qwen3.5's
  // does not (its split keeps a combining mark with its letter: "e" + U+0301 stays two tokens).
  if (v.pre_name == "qwen2" || v.pre_name == "deepseek-r1-qwen" || v.pre_name == "mpt" || v.pre_name == "command-r")
    v.normalization = UnicodeForm::NFC;
  v.bos_id = static_cast<int>(g.get_int("tokenizer.ggml.bos_token_id", -1));
  v.eos_id = static_cast<int>(g.get_int("tokenizer.ggml.eos_token_id", -1));
  v.add_bos = g.get_bool("tokenizer.ggml.add_bos_token", false) && v.bos_id >= 0;
  return std::make_unique<ByteLevelBpeTokenizer>(std::move(v));
}

}  // namespace

std::unique_ptr<Tokenizer> load_gguf_tokenizer(const GgufFile& g) {
  const std::string model = g.get_string("tokenizer.ggml.model", "");
  if (model.empty())
    throw input_error(g.path(), "no tokenizer in the metadata (tokenizer.ggml.model)");
  const std::vector<std::string>& tokens =
      array_of(g, "tokenizer.ggml.tokens", GgufType::String, 0).strings;
  if (tokens.empty()) throw input_error(g.path(), "tokenizer.ggml.tokens is empty");
  if (model == "llama") return spm_from_gguf(g, tokens);
  if (model == "gpt2") return bpe_from_gguf(g, tokens);
  throw input_error(g.path(),
                    "unsupported tokenizer model \"" + model + "\" (supported: llama, gpt2)");
}

std::unique_ptr<Tokenizer> load_gguf_tokenizer(const std::string& path) {
  return load_gguf_tokenizer(GgufFile(path));
}

}  // namespace kvs
