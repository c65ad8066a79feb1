// A model's chat format: its chat template rendered (inference/jinja_render.h), else the format of
// its family from a fixed table, detected from the template.
#pragma once
#include <string>
#include <vector>

#include "inference/model.h"
#include "inference/tokenizer.h"

namespace kvs {

// Families: "smollm2" (ChatML with SmolLM2's default system prompt), "qwen2.5" (ChatML with
// Qwen2.5's), "chatml" (Qwen2's ChatML with its default system prompt), "qwen3" (ChatML without a
// system turn, the reply left to open its <think> block), "llama2" ([INST] ... [/INST]), "llama3"
// (header ids), "llama3.1" (BOS, then Llama 3.1's and 3.3's system turn, dated 26 Jul 2024, then
// as llama3), "llama3.2" (the same dated today, as transformers' strftime_now dates it), "mistral"
// ([INST] ... [/INST] without a system block: v0.1, v0.2), "mistral-v3" (BOS, [INST] ...[/INST]),
// "mistral-tekken" (BOS, [INST]...[/INST] without spaces: Mistral Nemo), "smollm3" (ChatML with
// SmolLM3's default system turn in thinking mode, as its template edited by Unsloth writes it),
// "granite3.3" (Granite 3.3's roles with its system turn dated today), "gemma" (<start_of_turn>
// user ... <end_of_turn>, then the model's turn), "phi3" (<|user|> ... <|end|>, then
// <|assistant|>), "tulu" (BOS, <|user|> ... on its own line, then <|assistant|>: OLMo 2 Instruct),
// "deepseek-r1" (BOS, <｜User｜> ..., then <｜Assistant｜> and the opened <think> block: the
// R1-distilled models), "deepseek-v3" (the same without <think>: DeepSeek-V3, R1-0528's distills).
// "" = base model, no template.
std::vector<std::string> chat_families();

// Family of a Jinja chat template string (GGUF tokenizer.chat_template, tokenizer_config.json's
// chat_template); "" when none matches or the template is empty.
std::string detect_chat_family(const std::string& chat_template);

// The chat template the model carries, verbatim ("" for none, e.g. stories260K): a GGUF file's
// tokenizer.chat_template, an HF folder's template files.
std::string chat_template_for_model(const Model& model);

// The chat template at a model's path without loading its weights ("" where none or where the
// path cannot be read): a GGUF file's, an HF folder's (or the folder of a tokenizer.json given).
std::string chat_template_for_path(const std::string& path);

// Whether the family's template writes the BOS token first (Tulu's, DeepSeek's), so that a prompt in it
// starts with BOS even where the tokenizer adds none itself; false for "" and unknown families.
bool chat_opens_with_bos(const std::string& family);

// One user message in a model's chat format, ready for the tokenizer.
struct ChatPrompt {
  std::string text;          // as rendered: a BOS the template writes is its token's text, read as it
  bool bos_in_text = false;  // text starts with the BOS token's text
  bool add_bos = false;      // BOS is to be added before text (a fixed family that opens with it)
  std::string source;        // "template" (rendered) or the fixed family it is written in

  // Whether the tokenizer adds BOS to text: where the format asks for it, or where the tokenizer
  // adds it by default and the text does not already start with it.
  bool encode_with_bos(const Tokenizer& tok) const { return add_bos || (tok.add_bos() && !bos_in_text); }
};

// `message` in the chat format of `chat_template`: the template rendered by KVScope's Jinja subset
// (inference/jinja_render.h) as transformers' apply_chat_template renders it (one user message,
// the generation prompt, tools and documents None, the tokenizer's BOS and EOS text as bos_token
// and eos_token); where the subset cannot render it, the fixed family's format. Throws InputError
// ("--chat: ...") where neither: the reason the template failed, the formats KVScope writes.
// With a `system` text, a system turn comes first (which only a rendered template writes: the
// fixed formats have none, so InputError "--system: ..." where it cannot be rendered).
ChatPrompt chat_prompt(const std::string& chat_template, const Tokenizer& tok, const std::string& message,
                       const std::string& system = "");

// The prompt text for one user turn, ready for the tokenizer (which adds BOS itself when the
// family needs it); the message stripped of surrounding white space where the family's template
// strips it (llama3*, gemma). An empty family returns the message unchanged. Throws InputError
// for an unknown family.
std::string format_chat(const std::string& family, const std::string& user_message);

}  // namespace kvs
