// `kvscope tokenize`: a text's tokens as `record` would feed them (the model's tokenizer, BOS where
// it adds one, --chat's format), or as a tokenizer file alone encodes it, without the weights.
#include <cstdio>
#include <filesystem>
#include <memory>

#include "analysis/json_writer.h"
#include "analysis/trace_snapshot.h"
#include "app/cli/args.h"
#include "app/cli/commands.h"
#include "app/cli/printable.h"
#include "app/cli/record.h"
#include "inference/bpe_merge.h"
#include "inference/chat_template.h"
#include "inference/errors.h"
#include "inference/loader.h"

namespace kvs {

namespace {

// A special token (BOS, "<|im_start|>", ...) decodes to nothing; every other token to its bytes.
bool is_special(const Tokenizer& tok, int id) { return tok.decode_piece(id, id).empty(); }

// A token's bytes as a quoted C-style string a terminal shows whole: '"' and '\' escaped, then
// bytes that are not UTF-8 (half a character split across byte tokens) and control bytes as the
// app labels tokens ("\n", "\t", "\r", else "\xNN").
std::string quoted(const std::string& bytes) {
  std::string slashed;  // first: the escapes that follow start with '\'
  for (char c : bytes) {
    if (c == '\\' || c == '"') slashed += '\\';
    slashed += c;
  }
  std::string out = "\"";
  out += token_label(escape_invalid_utf8(slashed));
  return out += '"';
}

// One text's tokens: a JSON object on one line, or a line per token and the count.
// chat: "template" (the model's chat template rendered), the fixed family used, or "" (no --chat).
void print_tokens(const Tokenizer& tok, const std::string& text, const std::vector<int>& ids, bool bos,
                  const std::string& chat, bool json) {
  if (json) {
    std::vector<std::string> pieces;
    std::vector<bool> special;
    for (const int id : ids) {
      pieces.push_back(tok.token_text(id));
      special.push_back(is_special(tok, id));
    }
    JsonObject o;
    o.add("tokenizer", tok.kind()).add("vocab_size", tok.vocab_size()).add_bool("bos_added", bos);
    if (chat.empty()) o.add_null("chat");
    else o.add("chat", chat);
    o.add("text", text).add("n_tokens", static_cast<int>(ids.size())).add("ids", ids)
        .add("pieces", pieces).add("special", special);
    std::printf("%s\n", o.str().c_str());
    return;
  }
  const int pos_width = static_cast<int>(std::to_string(ids.empty() ? 0 : ids.size() - 1).size());
  const int id_width = static_cast<int>(std::to_string(tok.vocab_size()).size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const int id = ids[i];
    const std::string shown = is_special(tok, id) ? printable(tok.token_text(id)) : quoted(tok.decode_piece(id, id));
    std::printf("%*zu  %*d  %s\n", pos_width, i, id_width, id, shown.c_str());
  }
  const std::string format = chat.empty()           ? ""
                             : chat == "template" ? ", in the model's chat template"
                                                  : ", in the " + chat + " chat format";
  std::printf("%zu token%s (%s, %d in its vocabulary%s%s)\n", ids.size(), ids.size() == 1 ? "" : "s",
              tok.kind().c_str(), tok.vocab_size(), bos ? ", BOS added" : "", format.c_str());
}

}  // namespace

int cmd_tokenize(const ArgList& argv) {
  Args a(argv, {"--tokenizer", "--text", "--text-file", "--system"}, {"--chat", "--no-bos", "--json"}, {"--text"});
  if (a.has("--system") && !a.has("--chat"))
    throw input_error("--system", "applies to --chat's format, and --chat is not given");
  if (a.has("--system") && a.str("--system").empty()) throw input_error("--system", "is empty");
  if (a.positional().size() > 1)
    throw input_error(a.positional()[1], "unexpected argument (tokenize takes one model)");
  for (const char* flag : {"--tokenizer", "--text-file"})
    if (a.has(flag) && a.str(flag).empty()) throw input_error(flag, "is empty");
  if (a.positional().empty() && !a.has("--tokenizer"))
    throw input_error("tokenize", "expects a model path or --tokenizer PATH");
  if (a.has("--text") == a.has("--text-file"))
    throw input_error("--text", "give --text TEXT (once or more) or --text-file F");
  // The texts first, as record checks its prompt before it loads the model.
  std::vector<std::string> texts;
  if (a.has("--text-file")) {
    texts.push_back(read_prompt_file(a.str("--text-file"), "text file"));
  } else {
    texts = a.all("--text");
    for (const std::string& text : texts) {
      if (text.empty()) throw input_error("--text", "is empty");
      require_prompt_text(text, "--text", "");
    }
  }

  std::unique_ptr<Tokenizer> tok;
  std::string chat_template, source;
  if (!a.positional().empty()) {  // what record would use: the model's tokenizer, or --tokenizer checked against it
    source = a.positional()[0];
    const Model model = load_model(source, ModelParts::ConfigOnly);
    tok = load_tokenizer(model, a.str("--tokenizer"));
    if (a.has("--chat")) chat_template = chat_template_for_model(model);
  } else {  // a tokenizer file alone: a GGUF file's template, or tokenizer_config.json's beside tokenizer.json
    source = a.str("--tokenizer");
    tok = load_tokenizer_file(source);
    if (a.has("--chat")) chat_template = chat_template_for_path(source);
  }
  if (a.has("--chat") && chat_template.empty())
    throw input_error("--chat", source + " has no chat format (a base model, or no chat template in or beside it)");
  for (size_t i = 0; i < texts.size(); ++i) {
    if (i && !a.has("--json")) std::printf("\n");
    ChatPrompt chat{texts[i], false, false, ""};  // unchanged without --chat
    if (a.has("--chat")) chat = chat_prompt(chat_template, *tok, texts[i], a.str("--system"));
    const bool bos = chat.encode_with_bos(*tok) && !a.has("--no-bos");
    print_tokens(*tok, chat.text, tok->encode(chat.text, bos), bos, chat.source, a.has("--json"));
  }
  return 0;
}

}  // namespace kvs
