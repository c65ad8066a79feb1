// Chat prompt formats: the fixed table, detection from chat templates, the template files of an HF
// folder, and the families of the test models (stories260K has none; SmolLM2's GGUF template is
// ChatML with its system prompt).
#include <gtest/gtest.h>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <string>

#include "inference/chat_template.h"
#include "inference/loader.h"
#include "loader_test_util.h"

namespace kvs {
namespace {

using testing::shared_model;
using testing::TempDir;

TEST(ChatTemplate, FormatsEachFamily) {
  EXPECT_EQ(format_chat("smollm2", "Hi"),
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
            "Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(format_chat("chatml", "Hi"),
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi"
            "<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(format_chat("llama2", "Hi"), "[INST] Hi [/INST]");
  EXPECT_EQ(format_chat("mistral", "Hi"), "[INST] Hi [/INST]");
  EXPECT_EQ(format_chat("llama3", "Hi"),
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant"
            "<|end_header_id|>\n\n");
  EXPECT_EQ(format_chat("", "Once upon a time"), "Once upon a time");
  EXPECT_THROW(format_chat("vicuna", "Hi"), InputError);
  EXPECT_EQ(format_chat("qwen2.5", "Hi"),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(format_chat("qwen3", "Hi"), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(format_chat("gemma", "Hi"), "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(format_chat("phi3", "Hi"), "<|user|>\nHi<|end|>\n<|assistant|>\n");
  EXPECT_EQ(format_chat("tulu", "Hi"), "<|user|>\nHi\n<|assistant|>\n");
  EXPECT_EQ(format_chat("deepseek-r1", "Hi"), "<｜User｜>Hi<｜Assistant｜><think>\n");
  EXPECT_EQ(format_chat("deepseek-v3", "Hi"), "<｜User｜>Hi<｜Assistant｜>");
  EXPECT_EQ(format_chat("llama3.1", "Hi"),
            "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul "
            "2024\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant"
            "<|end_header_id|>\n\n");
  EXPECT_EQ(format_chat("mistral-v3", "Hi"), "[INST] Hi[/INST]");
  EXPECT_EQ(format_chat("mistral-tekken", "Hi"), "[INST]Hi[/INST]");
  EXPECT_TRUE(format_chat("smollm3", "Hi").starts_with(
      "<|im_start|>system\n## Metadata\n\nKnowledge Cutoff Date: June 2025\nReasoning Mode: /think\n\n## Custom"));
  EXPECT_TRUE(format_chat("smollm3", "Hi").ends_with(
      "conclusion.\n\n<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"));
  EXPECT_EQ(chat_families().size(), 18u);
  // Tulu's, DeepSeek's, Llama 3.1+'s and Mistral v0.3's and Nemo's templates write BOS whatever the
  // tokenizer does.
  for (const std::string& family : chat_families())
    EXPECT_EQ(chat_opens_with_bos(family), family == "tulu" || family.starts_with("deepseek") ||
                                               family == "llama3.1" || family == "llama3.2" ||
                                               family == "mistral-v3" || family == "mistral-tekken")
        << family;
  EXPECT_FALSE(chat_opens_with_bos(""));
}

TEST(ChatTemplate, DetectsFamilies) {
  EXPECT_EQ(detect_chat_family(""), "");
  // Qwen2's ChatML, whose system turn says "You are a helpful assistant."; ChatML without it (or
  // with another default system prompt) is no family: KVScope would write a turn the model's
  // template does not.
  EXPECT_EQ(detect_chat_family("{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{{ "
                               "'<|im_start|>' + message['role'] }}"),
            "chatml");
  EXPECT_EQ(detect_chat_family("{{ '<|im_start|>' + message['role'] }}"), "");
  EXPECT_EQ(detect_chat_family("{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
                               "assistant.<|im_end|>\\n' }}{{ '<|im_start|>' + message['role'] }}"),
            "qwen2.5");
  // Qwen3's template (its generation prompt, abridged): no system turn unless the messages hold one.
  EXPECT_EQ(detect_chat_family("{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- if "
                               "enable_thinking is defined and enable_thinking is false %}{{- "
                               "'<think>\\n\\n</think>\\n\\n' }}{%- endif %}{%- endif %}"),
            "qwen3");
  // Qwen3.5's and QwQ's open the <think> block in the generation prompt: not Qwen3's format
  EXPECT_EQ(detect_chat_family("{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- if "
                               "enable_thinking is defined and enable_thinking is false %}{{- "
                               "'<think>\\n\\n</think>\\n\\n' }}{%- else %}{{- '<think>\\n' }}{%- endif %}{%- endif %}"),
            "");
  EXPECT_EQ(detect_chat_family("{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n<think>\\n' }}"), "");
  EXPECT_EQ(detect_chat_family("<|im_start|>system\nYou are a helpful AI assistant named SmolLM"),
            "smollm2");
  // SmolLM3's as released (abridged): the day's date and a reasoning mode in its system turn, which
  // no fixed format gives; not SmolLM2's. As Unsloth edited it (no date): SmolLM3's format.
  EXPECT_EQ(detect_chat_family("{{- \"<|im_start|>system\\n\" -}}{{- \"Reasoning Mode: \" + reasoning_mode + "
                               "\"\\n\\n\" -}}You are a helpful AI assistant named SmolLM, trained by Hugging Face."),
            "smollm3");
  EXPECT_EQ(detect_chat_family("{{- \"<|im_start|>system\\n\" -}}{{- \"## Metadata\\n\\n\" -}}{{- \"Today Date: \" + "
                               "today + \"\\n\" -}}{{- \"Reasoning Mode: \" + reasoning_mode + \"\\n\\n\" -}}You are a "
                               "helpful AI assistant named SmolLM, trained by Hugging Face."),
            "");
  EXPECT_EQ(
      detect_chat_family("{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>' }}"),
      "llama3");
  // Llama 3.1's and 3.3's (abridged): a system turn dated 26 Jul 2024; 3.2's dated today
  const std::string llama31 =
      "{%- if not date_string is defined %}{%- set date_string = \"26 Jul 2024\" %}{%- endif %}{{- "
      "\"<|start_header_id|>system<|end_header_id|>\\n\\n\" }}{{- \"Cutting Knowledge Date: December 2023\\n\" }}";
  EXPECT_EQ(detect_chat_family(llama31), "llama3.1");
  EXPECT_EQ(detect_chat_family("{%- if strftime_now is defined %}{%- set date_string = strftime_now(\"%d %b %Y\") "
                               "%}{%- else %}" + llama31.substr(llama31.find("{%- set"))),
            "llama3.2");
  // A header-id template that writes a system turn of its own (functionary's, firefunction's)
  EXPECT_EQ(detect_chat_family("{{ '<|start_header_id|>system<|end_header_id|>\\n\\nYou are capable of "
                               "executing available function(s)' }}"),
            "");
  EXPECT_EQ(detect_chat_family("{{ bos_token + '[INST] <<SYS>>\\n' }}"), "llama2");
  EXPECT_EQ(detect_chat_family("{{ '[INST] ' + message['content'] + ' [/INST]' }}"), "mistral");
  EXPECT_EQ(detect_chat_family("{{- bos_token }}{{- \"[INST] \" + message[\"content\"] + \"[/INST]\" }}"), "mistral-v3");
  EXPECT_EQ(detect_chat_family("{{- bos_token }}{{- \"[INST]\" + message[\"content\"] + \"[/INST]\" }}"),
            "mistral-tekken");
  // Mistral Small 3's: a default system prompt
  EXPECT_EQ(detect_chat_family("{{- '[SYSTEM_PROMPT]' + default_system_message + '[/SYSTEM_PROMPT]' }}{{- '[INST]' + "
                               "message['content'] + '[/INST]' }}"),
            "");
  EXPECT_EQ(detect_chat_family("{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}"),
            "gemma");
  // Phi-3-mini's template (abridged)
  EXPECT_EQ(detect_chat_family("{% elif message['role'] == 'user' %}{{'<|user|>\\n' + message['content'] + "
                               "'<|end|>\\n'}}{% endif %}{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}"),
            "phi3");
  // OLMo 2 Instruct's (Tulu's) template, as its tokenizer_config.json holds it
  EXPECT_EQ(detect_chat_family(
                "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'system' %}{{ '<|system|>\\n' + "
                "message['content'] + '\\n' }}{% elif message['role'] == 'user' %}{{ '<|user|>\\n' + "
                "message['content'] + '\\n' }}{% elif message['role'] == 'assistant' %}{% if not loop.last %}{{ "
                "'<|assistant|>\\n'  + message['content'] + eos_token + '\\n' }}{% else %}{{ '<|assistant|>\\n'  + "
                "message['content'] + eos_token }}{% endif %}{% endif %}{% if loop.last and add_generation_prompt "
                "%}{{ '<|assistant|>\\n' }}{% endif %}{% endfor %}"),
            "tulu");
  // Tulu's without its BOS: not Tulu's format
  EXPECT_EQ(detect_chat_family("{% elif message['role'] == 'user' %}{{ '<|user|>\\n' + message['content'] + '\\n' }}"),
            "");
  // Zephyr's: the user's turn ends with EOS, not a newline; no family in the table
  EXPECT_EQ(detect_chat_family("{% if message['role'] == 'user' %}\n{{ '<|user|>\\n' + message['content'] + eos_token "
                               "}}\n{% elif message['role'] == 'assistant' %}\n{{ '<|assistant|>\\n'  + message['content'] + "
                               "eos_token }}"),
            "");
  // DeepSeek-R1-Distill-Qwen's generation prompt opens the <think> block; DeepSeek-V3's does not
  EXPECT_EQ(detect_chat_family("{{bos_token}}{{ns.system_prompt}}{%- for message in messages %}{%- if message['role'] "
                               "== 'user' %}{{'<｜User｜>' + message['content']}}{%- endif %}{%- endfor -%}{% if "
                               "add_generation_prompt and not ns.is_tool %}{{'<｜Assistant｜><think>\\n'}}{% endif %}"),
            "deepseek-r1");
  EXPECT_EQ(detect_chat_family("{{bos_token}}{%- for message in messages %}{%- if message['role'] == 'user' "
                               "%}{{'<｜User｜>' + message['content']}}{%- endif %}{%- endfor -%}{% if "
                               "add_generation_prompt and not ns.is_tool %}{{'<｜Assistant｜>'}}{% endif %}"),
            "deepseek-v3");
  // DeepSeek-V3.1+'s switch thinking on and off: no fixed format
  EXPECT_EQ(detect_chat_family("{%- if not thinking is defined %}{%- set thinking = false %}{%- endif %}{{'<｜User｜>' "
                               "+ message['content']}}{{'<｜Assistant｜></think>'}}"),
            "");
}

// The families whose templates strip the message (| trim) strip it as Python's str.strip() does,
// Unicode's spaces included; the others keep it as given. Llama 3.2's system turn is dated today.
TEST(ChatTemplate, TrimsWhereTheTemplateDoes) {
  EXPECT_EQ(format_chat("gemma", " \n\xC2\xA0Hi there\t\xE3\x80\x80 "), "<start_of_turn>user\nHi there<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(format_chat("llama3", "\nHi\n"), format_chat("llama3", "Hi"));
  EXPECT_EQ(format_chat("llama3", "   "), format_chat("llama3", ""));
  EXPECT_EQ(format_chat("qwen3", " Hi\n"), "<|im_start|>user\n Hi\n<|im_end|>\n<|im_start|>assistant\n");
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char date[32];
  std::strftime(date, sizeof date, "%d %b %Y", &local);  // the C locale's month names, as Python's
  const std::string llama32 = format_chat("llama3.2", "Hi");
  EXPECT_NE(llama32.find(std::string("\nToday Date: ") + date + "\n\n"), std::string::npos) << llama32;
  std::strftime(date, sizeof date, "%B %d, %Y", &local);
  EXPECT_EQ(format_chat("granite3.3", "Hi"),
            std::string("<|start_of_role|>system<|end_of_role|>Knowledge Cutoff Date: April 2024. Today's Date: ") + date +
                ". You are Granite, developed by IBM. You are a helpful AI assistant.<|end_of_text|>\n<|start_of_role|>"
                "user<|end_of_role|>Hi<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>");
  // Granite 3.3's template (abridged) is its family; Granite 3.1's (another system turn) none
  EXPECT_EQ(detect_chat_family("{%- set system_message = \"Knowledge Cutoff Date: April 2024. Today's Date: \" + "
                               "strftime_now('%B %d, %Y') + \". You are Granite, developed by IBM.\" %}{{- "
                               "'<|start_of_role|>system<|end_of_role|>' + system_message }}"),
            "granite3.3");
  EXPECT_EQ(detect_chat_family("{%- set system_message = \"Knowledge Cutoff Date: April 2024.\\nToday's Date: \" + "
                               "strftime_now('%B %d, %Y') + \".\\nYou are Granite\" %}{{- '<|start_of_role|>system' }}"),
            "");
}

// An HF folder's template: tokenizer_config.json's chat_template first, else chat_template.jinja
// (transformers 5 saves it there, not in tokenizer_config.json), else a processor's
// chat_template.json (Gemma 3 with its vision tower).
TEST(ChatTemplate, HfFolderTemplateFiles) {
  TempDir dir;
  const auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir.file(name), std::ios::binary) << text;
  };
  EXPECT_EQ(chat_template_for_path(dir.file("")), "");
  write("tokenizer_config.json", "{\"bos_token\": \"<bos>\"}");
  write("chat_template.json", "{\"chat_template\": \"{{ '<|start_header_id|>' }}\"}");
  EXPECT_EQ(chat_template_for_path(dir.file("")), "{{ '<|start_header_id|>' }}");
  write("chat_template.jinja", "{{ '<start_of_turn>' + role + '\\n' }}");
  EXPECT_EQ(chat_template_for_path(dir.file("")), "{{ '<start_of_turn>' + role + '\\n' }}");
  write("tokenizer_config.json", "{\"chat_template\": \"{{ '[INST] ' + message['content'] + ' [/INST]' }}\"}");
  EXPECT_EQ(chat_template_for_path(dir.file("")), "{{ '[INST] ' + message['content'] + ' [/INST]' }}");
  // a tokenizer.json given alone: its folder's
  EXPECT_EQ(chat_template_for_path(dir.file("tokenizer.json")), "");
  write("tokenizer.json", "{}");
  EXPECT_EQ(chat_template_for_path(dir.file("tokenizer.json")), "{{ '[INST] ' + message['content'] + ' [/INST]' }}");
}

TEST(ChatTemplate, TestModels) {
  EXPECT_EQ(chat_template_for_model(load_model(shared_model("stories260K/stories260K.bin"))), "");
  EXPECT_EQ(chat_template_for_model(load_model(shared_model("stories260K/stories260K.gguf"))), "");
  // By path, without loading the weights (the app's default for its chat-format box).
  EXPECT_EQ(chat_template_for_path(shared_model("stories260K/stories260K.bin")), "");
  EXPECT_EQ(chat_template_for_path(shared_model("stories260K/stories260K.gguf")), "");
  EXPECT_EQ(chat_template_for_path("/nonexistent/model.gguf"), "");
  const std::string smol = default_model_path();
  if (smol.empty()) GTEST_SKIP() << "SmolLM2 GGUF not in the cache";
  const Model m = load_model(smol);
  EXPECT_EQ(chat_template_for_path(smol), chat_template_for_model(m));
  EXPECT_EQ(detect_chat_family(chat_template_for_model(m)), "smollm2");
  const auto tok = load_tokenizer(m, "");
  // Its template rendered is its family's fixed format; it opens with <|im_start|>, which is
  // SmolLM2's BOS token, so nothing is added before it
  const ChatPrompt p = chat_prompt(chat_template_for_model(m), *tok, "Hi");
  EXPECT_EQ(p.text, format_chat("smollm2", "Hi"));
  EXPECT_TRUE(p.bos_in_text);
  EXPECT_FALSE(p.encode_with_bos(*tok));
  EXPECT_EQ(p.source, "template");
  const std::vector<int> ids = tok->encode(p.text, p.encode_with_bos(*tok));
  EXPECT_EQ(ids.front(), 1);  // <|im_start|> matched as one special token
  EXPECT_EQ(tok->decode_piece(-1, ids[1]), "system");
}

}  // namespace
}  // namespace kvs
