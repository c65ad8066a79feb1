// Format dispatch for models (llama2.c .bin, GGUF, Hugging Face folders) and tokenizers, and the
// default model location.
#include "inference/loader.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "inference/errors.h"
#include "inference/gguf_file.h"
#include "inference/gguf_model.h"
#include "inference/gguf_tokenizer.h"
#include "inference/hf_model.h"
#include "inference/llama2c_model.h"
#include "inference/llama2c_tokenizer.h"
#include "inference/mapped_file.h"
#include "inference/sentencepiece_model.h"
#include "inference/tokenizer_json.h"

namespace fs = std::filesystem;

namespace kvs {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::unique_ptr<Tokenizer> load_tokenizer_file(const std::string& path) {
  // Told before anything is opened: the format sniffing would block on a FIFO.
  switch (path_kind(path)) {
    case PathKind::Missing:
      throw input_error(path, "no such file");
    case PathKind::Other:
      throw input_error(path, "not a regular file");
    case PathKind::Folder: {
      const std::string json = (fs::path(path) / "tokenizer.json").string();
      if (path_kind(json) == PathKind::Missing)
        throw input_error(path, "is a folder without tokenizer.json (give a tokenizer file, or a Hugging Face model "
                                "folder)");
      return load_tokenizer_json(json);
    }
    case PathKind::RegularFile:
      break;
  }
  if (ends_with(path, ".json")) return load_tokenizer_json(path);
  if (ends_with(path, ".model")) return load_sentencepiece_model(path);
  if (is_gguf_file(path)) return load_gguf_tokenizer(path);
  return load_llama2c_tokenizer(path);
}

namespace {

// llama2.c tokenizer beside a .bin: tokenizer.bin, then tok<vocab>.bin.
std::string llama2c_tokenizer_beside(const Model& model) {
  const fs::path dir = fs::path(model.path).parent_path();
  for (const std::string& name :
       {std::string("tokenizer.bin"), "tok" + std::to_string(model.config.vocab_size) + ".bin"}) {
    const fs::path candidate = dir / name;
    if (path_kind(candidate.string()) != PathKind::Missing) return candidate.string();
  }
  return "";
}

// The HDF5 signature at offset 0 (where KVScope writes it; HDF5 also allows 512, 1024, ...).
bool is_hdf5_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[8] = {};
  return in.read(magic, 8) && std::memcmp(magic, "\x89HDF\r\n\x1a\n", 8) == 0;
}

}  // namespace

Model load_model(const std::string& path, ModelParts parts) {
  // Told before anything is opened: the format sniffing would block on a FIFO.
  switch (path_kind(path)) {
    case PathKind::Missing:
      throw input_error(path, "no such file or folder");
    case PathKind::Other:
      throw input_error(path, "not a regular file");
    case PathKind::Folder:
      return load_hf_model(path, parts);
    case PathKind::RegularFile:
      break;
  }
  std::error_code ec;
  if (fs::file_size(path, ec) == 0) throw input_error(path, "is empty (0 bytes)");
  // A file inside a Hugging Face folder stands for the folder.
  if (ends_with(path, ".safetensors") || ends_with(path, "config.json")) {
    return load_hf_model(fs::path(path).parent_path().string(), parts);
  }
  if (is_gguf_file(path)) return load_gguf_model(path, parts);
  if (is_hdf5_file(path)) throw input_error(path, "is an HDF5 file (a KVScope trace?), not a model");
  try {
    return load_llama2c_model(path, parts);
  } catch (const InputError&) {
    // A tokenizer given as the model is the likely slip: say so.
    auto opens_as = [&](auto load) {
      try {
        return load(path)->vocab_size() > 0;
      } catch (const std::exception&) {
        return false;
      }
    };
    if (opens_as(load_llama2c_tokenizer))
      throw input_error(path, "is a llama2.c tokenizer, not a model (give it as --tokenizer)");
    if (opens_as(load_sentencepiece_model))
      throw input_error(path, "is a SentencePiece tokenizer model, not a model (give it as --tokenizer)");
    throw;
  }
}

std::unique_ptr<Tokenizer> load_tokenizer(const Model& model, const std::string& tokenizer_path) {
  std::string source = tokenizer_path;
  std::unique_ptr<Tokenizer> tok;
  bool own_folder =
      false;  // the HF folder's own tokenizer may cover fewer ids than padded embeddings
  if (!tokenizer_path.empty()) {
    tok = load_tokenizer_file(tokenizer_path);
  } else if (model.format == "gguf") {
    source = model.path;
    tok = load_gguf_tokenizer(model.path);
  } else if (model.format == "hf") {
    source = (fs::path(model.path) / "tokenizer.json").string();
    const std::string spm = (fs::path(model.path) / "tokenizer.model").string();
    if (path_kind(source) != PathKind::Missing) {
      tok = load_tokenizer_json(source);
    } else if (path_kind(spm) != PathKind::Missing) {
      source = spm;
      tok = load_sentencepiece_model(source);
    } else {
      throw input_error(model.path, "no tokenizer.json or tokenizer.model in the model folder; pass --tokenizer");
    }
    own_folder = true;
  } else {
    source = llama2c_tokenizer_beside(model);
    if (source.empty()) {
      throw input_error(model.path, "no tokenizer found beside the model (tokenizer.bin or tok" +
                                        std::to_string(model.config.vocab_size) +
                                        ".bin); pass --tokenizer");
    }
    tok = load_llama2c_tokenizer(source);
  }
  const bool fits = own_folder ? tok->vocab_size() <= model.config.vocab_size
                               : tok->vocab_size() == model.config.vocab_size;
  if (!fits) {
    throw input_error(source, "vocabulary of " + std::to_string(tok->vocab_size()) +
                                  " tokens does not match the model's " +
                                  std::to_string(model.config.vocab_size));
  }
  return tok;
}

std::vector<int> text_end_ids(const Model& model, const Tokenizer& tokenizer) {
  return text_end_ids(model.config.end_ids, tokenizer);
}

std::vector<int> text_end_ids(const std::vector<int>& model_end_ids, const Tokenizer& tokenizer) {
  std::vector<int> ids = model_end_ids;
  for (int id : {tokenizer.eos_id(), tokenizer.bos_id()})
    if (id >= 0) ids.push_back(id);
  // A marker that is a token of its own is a special token: text spells it in several pieces.
  for (const char* marker : {"<|endoftext|>", "<|end_of_text|>", "<|im_end|>", "<|eot_id|>", "<|eom_id|>",
                             "<|end|>", "<end_of_turn>", "<|EOT|>"}) {
    const std::vector<int> one = tokenizer.encode(marker, false);
    if (one.size() == 1) ids.push_back(one[0]);
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

std::string default_model_path() {
  fs::path dir;
  if (const char* cache = std::getenv("KVSCOPE_CACHE"); cache != nullptr && *cache != '\0') {
    dir = cache;
  } else if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    dir = fs::path(home) / ".cache" / "kvscope" / "models";
  } else {
    return "";
  }
  const fs::path file = dir / "SmolLM2-135M-Instruct.Q4_1.gguf";
  std::error_code ec;
  return fs::is_regular_file(file, ec) ? file.string() : "";
}

}  // namespace kvs
