// Chat prompt formats of the supported model families, from a fixed table (no template engine),
// and detection of a model's family from its chat template.
#pragma once
#include <string>
#include <vector>

#include "inference/model.h"

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

// Family of a loaded model, from the GGUF metadata or the HF folder's chat template;
// "" for models without a chat template (e.g. stories260K).
std::string chat_family_for_model(const Model& model);

// The chat template the model carries, verbatim ("" for none): a GGUF file's
// tokenizer.chat_template, an HF folder's template files. Says, where the family is "", whether
// the model has no chat format or one KVScope does not write.
std::string chat_template_for_model(const Model& model);

// The same from the model's path without loading its weights (a GGUF file's metadata, an HF
// folder's template files): how the app chooses whether a recording uses the chat format
// by default. "" for other files, base models, and paths that cannot be read.
std::string chat_family_for_path(const std::string& model_path);

// Whether the family's template writes the BOS token first (Tulu's, DeepSeek's), so that a prompt in it
// starts with BOS even where the tokenizer adds none itself; false for "" and unknown families.
bool chat_opens_with_bos(const std::string& family);

// The prompt text for one user turn, ready for the tokenizer (which adds BOS itself when the
// family needs it); the message stripped of surrounding white space where the family's template
// strips it (llama3*, gemma). An empty family returns the message unchanged. Throws InputError
// for an unknown family.
std::string format_chat(const std::string& family, const std::string& user_message);

}  // namespace kvs
