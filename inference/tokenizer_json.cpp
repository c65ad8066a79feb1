// tokenizer.json -> SpmTokenizer (SentencePiece-style BPE) or ByteLevelBpeTokenizer.
#include "inference/tokenizer_json.h"

#include <filesystem>
#include <unordered_map>
#include <unordered_set>

#include "inference/errors.h"
#include "inference/json.h"
#include "inference/mapped_file.h"
#include "inference/tokenizer_bpe.h"
#include "inference/tokenizer_spm.h"

namespace kvs {
namespace {

const std::string kSpace = "\xe2\x96\x81";  // "▁"

struct AddedToken {
  std::string content;
  int id;
  bool special;
};

// Everything both tokenizer kinds need from the file.
struct Parsed {
  std::vector<std::string> tokens;  // [vocab] id -> string ("" for unused ids)
  std::unordered_map<std::string, int> ids;
  std::vector<std::pair<std::string, std::string>> merges;
  std::vector<AddedToken> added;
  int bos_id = -1, eos_id = -1;
  bool add_bos = false;
};

// Elements of the array member `key`, or none.
const std::vector<Json>& list_of(const Json& node, const char* key) {
  static const std::vector<Json> kNone;
  const Json* list = node.find(key);
  return list && list->is_array() ? list->items() : kNone;
}

bool has_type(const Json* node, const std::string& type, const char* list_key) {
  if (node == nullptr || !node->is_object()) return false;
  if (node->get_string("type", "") == type) return true;
  for (const Json& child : list_of(*node, list_key)) {
    if (has_type(&child, type, list_key)) return true;
  }
  return false;
}

// Name of a special token as tokenizer_config.json writes it: a string or {"content": ...}.
std::string token_name(const Json* v) {
  if (v == nullptr) return "";
  if (v->is_string()) return v->as_string();
  return v->is_object() ? v->get_string("content", "") : "";
}

// Finds the TemplateProcessing post-processor (alone or inside a Sequence).
const Json* template_processor(const Json* pp) {
  if (pp == nullptr || !pp->is_object()) return nullptr;
  if (pp->get_string("type", "") == "TemplateProcessing") return pp;
  for (const Json& child : list_of(*pp, "processors")) {
    if (const Json* t = template_processor(&child)) return t;
  }
  return nullptr;
}

// model.merges, each "a b" or [a, b]. As Hugging Face's tokenizers (0.23) does, the list must be
// there (it may be empty) and both parts must be in model.vocab; so must what they merge into,
// which Hugging Face also requires (it fails loading without one).
std::vector<std::pair<std::string, std::string>> parse_merges(const std::string& path, const Json& model,
                                                              const Json& vocab) {
  const Json* merges = model.find("merges");
  if (merges == nullptr || merges->is_null())
    throw input_error(path, "model.merges is missing (a BPE model needs the list, [] when it has none)");
  if (!merges->is_array()) throw input_error(path, "model.merges is not a list");
  const std::unordered_set<std::string> known(vocab.keys().begin(), vocab.keys().end());
  std::vector<std::pair<std::string, std::string>> out;
  for (const Json& m : merges->items()) {
    if (m.is_string()) {
      const std::string& s = m.as_string();
      const std::size_t space = s.find(' ', 1);
      if (space == std::string::npos) throw input_error(path, "merge \"" + s + "\" has no space");
      out.emplace_back(s.substr(0, space), s.substr(space + 1));
    } else if (m.is_array() && m.size() == 2 && m.items()[0].is_string() && m.items()[1].is_string()) {
      out.emplace_back(m.items()[0].as_string(), m.items()[1].as_string());
    } else {
      throw input_error(path, "model.merges holds an entry that is neither \"a b\" nor [a, b]");
    }
    const auto& [a, b] = out.back();
    const std::string merge = "merge \"" + a + " " + b + "\" ";
    for (const std::string& part : {a, b}) {
      if (!known.count(part)) throw input_error(path, merge + "names \"" + part + "\", which is not in model.vocab");
    }
    if (!known.count(a + b)) throw input_error(path, merge + "makes \"" + a + b + "\", which is not in model.vocab");
  }
  return out;
}

Parsed parse_common(const std::string& path, const Json& j, const Json& model) {
  Parsed p;
  const Json* vocab = model.find("vocab");
  if (vocab == nullptr || !vocab->is_object()) throw input_error(path, "model.vocab is missing");
  int max_id = -1;
  auto check_id = [&](const Json& v, const std::string& what) {
    if (!v.is_number() || v.as_number() < 0 || v.as_number() >= (1 << 24)) {
      throw input_error(path, what + " has an invalid id");
    }
    return static_cast<int>(v.as_number());
  };
  std::vector<std::pair<std::string, int>> entries;
  for (std::size_t i = 0; i < vocab->keys().size(); ++i) {
    entries.emplace_back(vocab->keys()[i],
                         check_id(vocab->items()[i], "token " + vocab->keys()[i]));
    max_id = std::max(max_id, entries.back().second);
  }
  if (const Json* added = j.find("added_tokens"); added && added->is_array()) {
    for (const Json& a : added->items()) {
      const Json* id = a.find("id");
      if (id == nullptr) throw input_error(path, "added token without an id");
      const AddedToken t{a.get_string("content", ""), check_id(*id, "added token"),
                         a.get_bool("special", false)};
      if (t.content.empty())
        throw input_error(path, "added token " + std::to_string(t.id) + " has no content");
      p.added.push_back(t);
      entries.emplace_back(t.content, t.id);
      max_id = std::max(max_id, t.id);
    }
  }
  p.tokens.assign(max_id + 1, "");
  for (const auto& [s, id] : entries) {
    p.tokens[id] = s;
    p.ids[s] = id;
  }
  p.merges = parse_merges(path, model, *vocab);
  // BOS from the post-processor template: a leading special token means prompts get it.
  if (const Json* tp = template_processor(j.find("post_processor"))) {
    const Json* single = tp->find("single");
    if (single && single->is_array() && single->size() > 0) {
      if (const Json* st = single->items()[0].find("SpecialToken")) {
        auto it = p.ids.find(st->get_string("id", ""));
        if (it != p.ids.end()) {
          p.bos_id = it->second;
          p.add_bos = true;
        }
      }
    }
  }
  // tokenizer_config.json beside the file names BOS/EOS and may override add_bos_token.
  const std::filesystem::path config =
      std::filesystem::path(path).parent_path() / "tokenizer_config.json";
  if (path_kind(config.string()) != PathKind::Missing) {
    const Json c = Json::parse_file(config.string());
    auto lookup = [&](const char* key) {
      auto it = p.ids.find(token_name(c.find(key)));
      return it == p.ids.end() ? -1 : it->second;
    };
    if (const int bos = lookup("bos_token"); bos >= 0) p.bos_id = bos;
    if (const int eos = lookup("eos_token"); eos >= 0) p.eos_id = eos;
    p.add_bos = c.get_bool("add_bos_token", p.add_bos) && p.bos_id >= 0;
  }
  // Without a config naming it, EOS by its usual names among the added tokens: an ordinary
  // vocabulary entry spelled "</s>" (Qwen2's 128247) is no end of text.
  for (const char* name : {"</s>", "<|endoftext|>", "<|end_of_text|>", "<|im_end|>"}) {
    if (p.eos_id >= 0) break;
    for (const AddedToken& a : p.added)
      if (a.content == name) p.eos_id = a.id;
  }
  return p;
}

std::vector<int> token_types(const Parsed& p) {
  std::vector<int> types(p.tokens.size(), kTokenNormal);
  for (std::size_t i = 0; i < p.tokens.size(); ++i) {
    if (p.tokens[i].empty())
      types[i] = kTokenUnused;
    else if (parse_byte_piece(p.tokens[i]) >= 0)
      types[i] = kTokenByte;
  }
  for (const AddedToken& a : p.added) types[a.id] = a.special ? kTokenControl : kTokenUserDefined;
  return types;
}

// Applies the SentencePiece-style normalizer (Prepend "▁", Replace " " -> "▁") or Metaspace
// pre-tokenizer settings to `v`; a Split at " " after that Replace (Gemma's files) splits nothing.
void spm_settings(const std::string& path, const Json& j, SpmVocab& v) {
  v.add_space_prefix = false;
  bool spaces_replaced = false;  // the normalizer turns " " into "▁"
  std::vector<const Json*> steps;
  if (const Json* n = j.find("normalizer"); n && !n->is_null()) {
    if (n->get_string("type", "") == "Sequence") {
      for (const Json& s : list_of(*n, "normalizers")) steps.push_back(&s);
    } else {
      steps.push_back(n);
    }
  }
  for (const Json* s : steps) {
    const std::string type = s->get_string("type", "");
    if (unicode_form_named(type, v.normalization)) {
      // composed or decomposed before the other steps, as listed first in the files seen
    } else if (type == "Prepend" && s->get_string("prepend", "") == kSpace) {
      v.add_space_prefix = true;
    } else if (type == "Replace" && s->find("pattern") &&
               s->find("pattern")->get_string("String", "") == " " &&
               s->get_string("content", "") == kSpace) {
      spaces_replaced = true;  // spaces become "▁": what SpmTokenizer does anyway
    } else {
      throw input_error(path, "unsupported normalizer step \"" + type + "\"");
    }
  }
  if (const Json* pre = j.find("pre_tokenizer"); pre && !pre->is_null()) {
    const Json* pattern = pre->find("pattern");
    if (pre->get_string("type", "") == "Split" && spaces_replaced && pattern && pattern->is_object() &&
        pattern->get_string("String", "") == " ") {
      return;  // Gemma's split at literal spaces, after the normalizer left none: nothing to split
    }
    if (pre->get_string("type", "") != "Metaspace") {
      throw input_error(path, "unsupported pre-tokenizer \"" + pre->get_string("type", "") +
                                  "\" for a byte-fallback BPE model");
    }
    const std::string scheme = pre->get_string(
        "prepend_scheme", pre->get_bool("add_prefix_space", true) ? "always" : "never");
    v.add_space_prefix = scheme != "never";
    v.prefix_after_special = scheme == "always";  // "first": only at the start of the text
    v.split_words = pre->get_bool("split", true);
  }
}

// Collects regex patterns from ByteLevel / Split / Digits pre-tokenizers (possibly in a Sequence).
void byte_level_patterns(const std::string& path, const Json* node, BpeVocab& v) {
  if (node == nullptr || node->is_null()) return;
  const std::string type = node->get_string("type", "");
  if (type == "Sequence") {
    for (const Json& child : list_of(*node, "pretokenizers")) byte_level_patterns(path, &child, v);
  } else if (type == "ByteLevel") {
    if (node->get_bool("use_regex", true)) v.pre_patterns.push_back(kGpt2Pattern);
    v.add_prefix_space = node->get_bool("add_prefix_space", false);
  } else if (type == "Digits") {
    v.pre_patterns.push_back(node->get_bool("individual_digits", false) ? R"(\p{N})" : R"(\p{N}+)");
  } else if (type == "Split") {
    const Json* pattern = node->find("pattern");
    if (node->get_string("behavior", "") != "Isolated" || node->get_bool("invert", false) ||
        pattern == nullptr) {
      throw input_error(path,
                        "unsupported Split pre-tokenizer (only behavior Isolated, invert false)");
    }
    if (const Json* re = pattern->find("Regex")) {
      v.pre_patterns.push_back(re->as_string());
    } else {
      v.pre_patterns.push_back("\\Q" + pattern->get_string("String", "") + "\\E");
    }
  } else {
    throw input_error(path, "unsupported pre-tokenizer \"" + type + "\"");
  }
}

std::string family_of(const std::vector<std::string>& patterns) {
  if (patterns == std::vector<std::string>{kLlama3Pattern}) return "llama3";
  if (patterns == std::vector<std::string>{kQwen2Pattern}) return "qwen2";
  if (patterns == std::vector<std::string>{R"(\p{N})", kGpt2Pattern}) return "smollm";
  if (patterns == std::vector<std::string>{kGpt2Pattern}) return "gpt2";
  return "custom";
}

}  // namespace

std::unique_ptr<Tokenizer> load_tokenizer_json(const std::string& path) {
  const Json j = Json::parse_file(path);
  const Json* model = j.find("model");
  if (model == nullptr || !model->is_object()) throw input_error(path, "no \"model\" object");
  const std::string type = model->get_string("type", "BPE");
  if (type != "BPE")
    throw input_error(path, "unsupported tokenizer model \"" + type + "\" (supported: BPE)");
  Parsed p = parse_common(path, j, *model);
  const bool byte_level = has_type(j.find("pre_tokenizer"), "ByteLevel", "pretokenizers") ||
                          has_type(j.find("decoder"), "ByteLevel", "decoders");
  if (byte_level) {
    BpeVocab v;
    v.source = path;
    const Json* n = j.find("normalizer");
    const bool sequence = n && !n->is_null() && n->get_string("type", "") == "Sequence";
    // DeepSeek's files give an empty Sequence: no normalization.
    if (sequence && list_of(*n, "normalizers").empty()) n = nullptr;
    if (n && !n->is_null()) {
      const Json* form = n;  // a Unicode form, alone or as the only step of a Sequence
      if (sequence && list_of(*n, "normalizers").size() == 1) form = &list_of(*n, "normalizers").front();
      if (!unicode_form_named(form->get_string("type", ""), v.normalization))
        throw input_error(path, "unsupported normalizer \"" + form->get_string("type", "") +
                                    "\" for byte-level BPE (supported: NFC, NFD, NFKC, NFKD)");
    }
    byte_level_patterns(path, j.find("pre_tokenizer"), v);
    v.pre_name = family_of(v.pre_patterns);
    v.types = token_types(p);
    for (const AddedToken& a : p.added) v.specials.emplace_back(a.content, a.id);
    v.tokens = std::move(p.tokens);
    v.merges = std::move(p.merges);
    v.ignore_merges = model->get_bool("ignore_merges", false);
    v.bos_id = p.bos_id;
    v.eos_id = p.eos_id;
    v.add_bos = p.add_bos;
    return std::make_unique<ByteLevelBpeTokenizer>(std::move(v));
  }
  SpmVocab v;
  spm_settings(path, j, v);
  v.types = token_types(p);
  v.pieces = std::move(p.tokens);
  v.merges = std::move(p.merges);
  v.merges_only = true;
  v.scores.assign(v.pieces.size(), 0.0f);
  const std::string unk = model->get_string("unk_token", "<unk>");
  auto it = p.ids.find(unk);
  v.unk_id = it == p.ids.end() ? 0 : it->second;
  v.bos_id = p.bos_id;
  v.eos_id = p.eos_id;
  v.add_bos = p.add_bos;
  v.match_special = true;
  return std::make_unique<SpmTokenizer>(std::move(v));
}

}  // namespace kvs
