// Fixed table of chat prompt formats and their detection from chat templates.
#include "inference/chat_template.h"

#include <filesystem>
#include <fstream>
#include <iterator>

#include "inference/errors.h"
#include "inference/gguf_file.h"
#include "inference/json.h"
#include "inference/mapped_file.h"

namespace kvs {
namespace {

struct ChatFormat {
  const char* family;
  const char* prefix;  // text before the user message
  const char* suffix;  // text after it, ending where the assistant's reply begins
  bool opens_with_bos = false;  // the template writes BOS first, whatever the tokenizer adds itself
};

const ChatFormat kFormats[] = {
    {"smollm2",
     "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
     "Face<|im_end|>\n<|im_start|>user\n",
     "<|im_end|>\n<|im_start|>assistant\n"},
    {"chatml", "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n",
     "<|im_end|>\n<|im_start|>assistant\n"},
    {"qwen2.5",
     "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
     "<|im_start|>user\n",
     "<|im_end|>\n<|im_start|>assistant\n"},
    {"qwen3", "<|im_start|>user\n", "<|im_end|>\n<|im_start|>assistant\n"},
    {"llama2", "[INST] ", " [/INST]"},
    {"llama3", "<|start_header_id|>user<|end_header_id|>\n\n",
     "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
    {"mistral", "[INST] ", " [/INST]"},
    {"gemma", "<start_of_turn>user\n", "<end_of_turn>\n<start_of_turn>model\n"},
    {"phi3", "<|user|>\n", "<|end|>\n<|assistant|>\n"},
    {"tulu", "<|user|>\n", "\n<|assistant|>\n", true},
    {"deepseek-r1", "<｜User｜>", "<｜Assistant｜><think>\n", true},
    {"deepseek-v3", "<｜User｜>", "<｜Assistant｜>", true},
};

bool contains(const std::string& s, const char* needle) {
  return s.find(needle) != std::string::npos;
}

}  // namespace

std::vector<std::string> chat_families() {
  std::vector<std::string> out;
  for (const ChatFormat& f : kFormats) out.emplace_back(f.family);
  return out;
}

std::string detect_chat_family(const std::string& t) {
  if (contains(t, "<|im_start|>")) {
    // SmolLM3's system turn holds the day's date and a reasoning mode: no fixed format gives it
    if (contains(t, "Reasoning Mode")) return "";
    if (contains(t, "SmolLM")) return "smollm2";
    if (contains(t, "<think>")) return "qwen3";  // reasoning turns; no default system prompt
    return contains(t, "You are Qwen, created by Alibaba Cloud") ? "qwen2.5" : "chatml";
  }
  if (contains(t, "<|start_header_id|>")) return "llama3";
  if (contains(t, "<start_of_turn>")) return "gemma";
  if (contains(t, "<|user|>") && contains(t, "<|end|>")) return "phi3";
  // Tulu's: BOS first, the user's turn ended with a newline (Zephyr's, which looks alike, ends it
  // with EOS; a look-alike without BOS is not taken for it either)
  if (contains(t, "<|user|>") && contains(t, "message['content'] + '\\n' }}") && contains(t, "bos_token"))
    return "tulu";
  // DeepSeek's fullwidth bars: R1's distilled models open the reply's <think> block themselves
  if (contains(t, "<｜User｜>")) return contains(t, "<｜Assistant｜><think>") ? "deepseek-r1" : "deepseek-v3";
  if (contains(t, "[INST]")) return contains(t, "<<SYS>>") ? "llama2" : "mistral";
  return "";
}

namespace {

// The chat template an HF model folder holds ("" when none): tokenizer_config.json's
// chat_template (a string, or a list of named ones: the "default"), else the file of its own
// that transformers saves since 4.50, chat_template.jinja, or a processor's chat_template.json
// ({"chat_template": "..."}), as Gemma 3's checkpoints with a vision tower keep it.
std::string hf_chat_template(const std::string& folder) {
  const std::filesystem::path dir(folder);
  if (const std::string config = (dir / "tokenizer_config.json").string(); path_kind(config) != PathKind::Missing) {
    const Json j = Json::parse_file(config);
    if (const Json* t = j.find("chat_template"); t != nullptr) {
      if (t->is_string()) return t->as_string();
      if (t->is_array()) {  // [{"name": "default", "template": "..."}, ...]
        for (const Json& named : t->items())
          if (named.get_string("name", "") == "default") return named.get_string("template", "");
      }
    }
  }
  if (const std::string jinja = (dir / "chat_template.jinja").string(); path_kind(jinja) != PathKind::Missing) {
    std::ifstream in(jinja, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  if (const std::string json = (dir / "chat_template.json").string(); path_kind(json) != PathKind::Missing)
    return Json::parse_file(json).get_string("chat_template", "");
  return "";
}

// Family from an HF model folder's chat template ("" when it has none).
std::string hf_chat_family(const std::string& folder) { return detect_chat_family(hf_chat_template(folder)); }

}  // namespace

std::string chat_template_for_model(const Model& model) {
  if (model.format == "gguf") return GgufFile(model.path).get_string("tokenizer.chat_template", "");
  if (model.format == "hf") return hf_chat_template(model.path);
  return "";
}

std::string chat_family_for_model(const Model& model) { return detect_chat_family(chat_template_for_model(model)); }

std::string chat_family_for_path(const std::string& model_path) {
  try {
    std::error_code ec;
    if (std::filesystem::is_directory(model_path, ec)) return hf_chat_family(model_path);
    if (!std::filesystem::is_regular_file(model_path, ec)) return "";
    if (!is_gguf_file(model_path)) return "";
    return detect_chat_family(GgufFile(model_path).get_string("tokenizer.chat_template", ""));
  } catch (const std::exception&) {
    return "";
  }
}

bool chat_opens_with_bos(const std::string& family) {
  for (const ChatFormat& f : kFormats)
    if (family == f.family) return f.opens_with_bos;
  return false;
}

std::string format_chat(const std::string& family, const std::string& user_message) {
  if (family.empty()) return user_message;
  for (const ChatFormat& f : kFormats) {
    if (family == f.family) return f.prefix + user_message + f.suffix;
  }
  throw input_error("chat format", "unknown family \"" + family + "\"");
}

}  // namespace kvs
