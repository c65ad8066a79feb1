// Chat prompts: a model's chat template rendered, else a fixed table of formats detected from it.
#include "inference/chat_template.h"

#include <filesystem>
#include <fstream>
#include <iterator>

#include "inference/errors.h"
#include "inference/gguf_file.h"
#include "inference/jinja_builtins.h"
#include "inference/jinja_render.h"
#include "inference/json.h"
#include "inference/mapped_file.h"

namespace kvs {
namespace {

struct ChatFormat {
  const char* family;
  const char* prefix;  // text before the user message ({today}: the day's date, as date_format writes it)
  const char* suffix;  // text after it, ending where the assistant's reply begins
  bool opens_with_bos = false;  // the template writes BOS first, whatever the tokenizer adds itself
  bool trims = false;           // the template strips the message's surrounding white space (| trim)
  const char* date_format = "";  // what the template asks strftime_now for, for {today}
};

// SmolLM3's default system turn in thinking mode (its template as Unsloth edited it: no date).
constexpr const char* kSmolLM3System =
    "<|im_start|>system\n## Metadata\n\nKnowledge Cutoff Date: June 2025\nReasoning Mode: /think\n\n"
    "## Custom Instructions\n\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face. Your role as an "
    "assistant involves thoroughly exploring questions through a systematic thinking process before providing the "
    "final precise and accurate solutions. This requires engaging in a comprehensive cycle of analysis, summarizing, "
    "exploration, reassessment, reflection, backtracking, and iteration to develop well-considered thinking "
    "process. Please structure your response into two main sections: Thought and Solution using the specified "
    "format: <think> Thought section </think> Solution section. In the Thought section, detail your reasoning "
    "process in steps. Each step should include detailed considerations such as analysing questions, summarizing "
    "relevant findings, brainstorming new ideas, verifying the accuracy of the current steps, refining any errors, "
    "and revisiting previous steps. In the Solution section, based on various attempts, explorations, and "
    "reflections from the Thought section, systematically present the final solution that you deem correct. The "
    "Solution section should be logical, accurate, and concise and detail necessary steps needed to reach the "
    "conclusion.\n\n<|im_end|>\n<|im_start|>user\n";

// The Llama 3.1+ system turn: its knowledge cutoff and a date (3.1's and 3.3's fixed, 3.2's today's).
#define KVS_LLAMA31_SYSTEM(date)                                                          \
  "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n" \
  "Today Date: " date "\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n"

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
     "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n", false, true},
    {"llama3.1", KVS_LLAMA31_SYSTEM("26 Jul 2024"), "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
     true, true},
    {"llama3.2", KVS_LLAMA31_SYSTEM("{today}"), "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
     true, true, "%d %b %Y"},
    {"smollm3", kSmolLM3System, "<|im_end|>\n<|im_start|>assistant\n"},
    {"granite3.3",
     "<|start_of_role|>system<|end_of_role|>Knowledge Cutoff Date: April 2024. Today's Date: {today}. You are "
     "Granite, developed by IBM. You are a helpful AI assistant.<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>",
     "<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>", false, false, "%B %d, %Y"},
    {"mistral", "[INST] ", " [/INST]"},
    {"mistral-v3", "[INST] ", "[/INST]", true},
    {"mistral-tekken", "[INST]", "[/INST]", true},
    {"gemma", "<start_of_turn>user\n", "<end_of_turn>\n<start_of_turn>model\n", false, true},
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

// Each family is taken only for the template it was written from (checked against llama.cpp's
// collection of real templates by scripts/check-chat-templates.sh): look-alikes that write more
// (a default system prompt, an opened or closed <think> block, a thinking switch) are no family,
// so that --chat refuses them rather than write another model's format.
std::string detect_chat_family(const std::string& t) {
  if (contains(t, "<|im_start|>")) {
    // SmolLM3's system turn holds a reasoning mode (and, in the template as released, the day's
    // date: no fixed format gives it; the edit Unsloth's GGUFs carry has none)
    if (contains(t, "Reasoning Mode")) return contains(t, "Today Date") ? "" : "smollm3";
    if (contains(t, "SmolLM")) return "smollm2";
    if (contains(t, "You are Qwen, created by Alibaba Cloud")) return "qwen2.5";
    // Qwen3's reasoning turns, the reply left to open its <think> block (QwQ and Qwen3.5 open it)
    if (contains(t, "<think>"))
      return contains(t, "'<think>\\n' }}") || contains(t, "assistant\\n<think>\\n'") ? "" : "qwen3";
    return contains(t, "You are a helpful assistant.<|im_end|>") ? "chatml" : "";
  }
  // Llama 3 writes no system turn; 3.1+ open with one that dates the conversation: 3.1's and
  // 3.3's always on the same day, 3.2's on today's (strftime_now)
  if (contains(t, "<|start_header_id|>")) {
    if (!contains(t, "Cutting Knowledge Date")) return contains(t, "system") ? "" : "llama3";
    if (!contains(t, "date_string = \"26 Jul 2024\"")) return "";
    return contains(t, "strftime_now") ? "llama3.2" : "llama3.1";
  }
  if (contains(t, "<start_of_turn>")) return "gemma";
  // Granite 3.3's default system turn, dated today (Granite 3.0-3.2 write others)
  if (contains(t, "<|start_of_role|>"))
    return contains(t, "Knowledge Cutoff Date: April 2024. Today's Date: \" + strftime_now('%B %d, %Y') + \". You "
                       "are Granite, developed by IBM.\"")
               ? "granite3.3"
               : "";
  if (contains(t, "<|user|>") && contains(t, "<|end|>")) return contains(t, "You are") ? "" : "phi3";
  // Tulu's: BOS first, the user's turn ended with a newline (Zephyr's, which looks alike, ends it
  // with EOS; a look-alike without BOS is not taken for it either)
  if (contains(t, "<|user|>") && contains(t, "message['content'] + '\\n' }}") && contains(t, "bos_token"))
    return "tulu";
  // DeepSeek's fullwidth bars: R1's distilled models open the reply's <think> block themselves;
  // V3.1+ switch thinking on and off (and close the block), llama.cpp's R1 template ends the
  // user's turn with EOS
  if (contains(t, "<｜User｜>")) {
    if (contains(t, "thinking") || contains(t, "<｜User｜>' + message['content'] + '<｜end▁of▁sentence｜>'")) return "";
    return contains(t, "<｜Assistant｜><think>") ? "deepseek-r1" : "deepseek-v3";
  }
  if (contains(t, "[INST]")) {
    if (contains(t, "<<SYS>>")) return "llama2";
    // BOS and no spaces inside the brackets (Tekken's: Mistral Nemo), BOS and a space after [INST]
    // (v0.3's), or spaces on both sides (v0.1's and v0.2's); Mistral Small 3+ and Devstral write a
    // default system prompt (some with the day's date): none of these
    if (contains(t, "\"[INST]\" + message[\"content\"] + \"[/INST]\"")) return "mistral-tekken";
    if (contains(t, "\"[INST] \" + message[\"content\"] + \"[/INST]\"")) return "mistral-v3";
    return contains(t, "' [/INST]'") ? "mistral" : "";
  }
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

}  // namespace

std::string chat_template_for_model(const Model& model) {
  if (model.format == "gguf") return GgufFile(model.path).get_string("tokenizer.chat_template", "");
  if (model.format == "hf") return hf_chat_template(model.path);
  return "";
}

std::string chat_template_for_path(const std::string& path) {
  try {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) return hf_chat_template(path);
    if (!std::filesystem::is_regular_file(path, ec)) return "";
    if (std::filesystem::path(path).extension() == ".json")
      return hf_chat_template(std::filesystem::path(path).parent_path().string());
    if (!is_gguf_file(path)) return "";
    return GgufFile(path).get_string("tokenizer.chat_template", "");
  } catch (const std::exception&) {
    return "";
  }
}

bool chat_opens_with_bos(const std::string& family) {
  for (const ChatFormat& f : kFormats)
    if (family == f.family) return f.opens_with_bos;
  return false;
}

ChatPrompt chat_prompt(const std::string& chat_template, const Tokenizer& tok, const std::string& message,
                       const std::string& system) {
  const auto special = [&](int id) { return id >= 0 && id < tok.vocab_size() ? tok.token_text(id) : std::string(); };
  const std::string bos = special(tok.bos_id()), eos = special(tok.eos_id());
  using jinja::Value;
  const auto turn = [](const char* role, const std::string& text) {
    return Value::make_dict({{"role", Value::string(role)}, {"content", Value::string(text)}});
  };
  jinja::List messages;
  if (!system.empty()) messages.push_back(turn("system", system));
  messages.push_back(turn("user", message));
  const jinja::Dict context = {
      {"messages", Value::make_list(std::move(messages))},
      {"add_generation_prompt", Value::boolean(true)},
      {"tools", Value::none()},
      {"documents", Value::none()},
      {"bos_token", Value::string(bos)},
      {"eos_token", Value::string(eos)}};
  try {
    std::string text = jinja::render(chat_template, context);
    const bool writes_bos = !bos.empty() && text.starts_with(bos);
    return {std::move(text), writes_bos, false, "template"};
  } catch (const jinja::Error& e) {
    if (!system.empty())
      throw input_error("--system", std::string("the chat template cannot be rendered (") + e.what() +
                                        "), and KVScope's fixed formats write no system turn");
    const std::string family = detect_chat_family(chat_template);
    if (!family.empty()) return {format_chat(family, message), false, chat_opens_with_bos(family), family};
    std::string families;
    for (const std::string& f : chat_families()) families += (families.empty() ? "" : ", ") + f;
    throw input_error("--chat", std::string("the chat template cannot be rendered (") + e.what() +
                                    ") and none of KVScope's fixed formats (" + families +
                                    ") matches it: give the formatted prompt without --chat");
  }
}

std::string format_chat(const std::string& family, const std::string& user_message) {
  if (family.empty()) return user_message;
  for (const ChatFormat& f : kFormats) {
    if (family != f.family) continue;
    std::string prefix = f.prefix;
    if (const std::size_t at = prefix.find("{today}"); at != std::string::npos) prefix.replace(at, 7, jinja::strftime_now(f.date_format));
    return prefix + (f.trims ? jinja::strip_space(user_message) : user_message) + f.suffix;
  }
  throw input_error("chat format", "unknown family \"" + family + "\"");
}

}  // namespace kvs
