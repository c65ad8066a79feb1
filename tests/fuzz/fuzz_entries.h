// Fuzz entry points shared by the libFuzzer targets (tests/fuzz/fuzz_*.cpp) and the regression
// test (tests/reliability/fuzz_regressions_test.cpp): each feeds one input through a parser.
// InputError is the expected answer to bad bytes and is swallowed; anything else escapes.
#pragma once
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/duo_pattern.h"
#include "analysis/retrieval_score.h"
#include "analysis/trace.h"
#include "inference/errors.h"
#include "inference/gguf_file.h"
#include "inference/gguf_model.h"
#include "inference/gguf_tokenizer.h"
#include "inference/hf_model.h"
#include "inference/jinja_render.h"
#include "inference/json.h"
#include "inference/llama2c_model.h"
#include "inference/llama2c_tokenizer.h"
#include "inference/safetensors_file.h"
#include "inference/sentencepiece_model.h"
#include "inference/tokenizer_json.h"
#include "tests/fuzz/fuzz_trace_edits.h"
#include "tests/test_paths.h"

namespace kvs::fuzz {

using Entry = void (*)(const uint8_t* data, size_t size);

// A per-process scratch folder (on /dev/shm when present), removed at exit.
inline const std::string& scratch_dir() {
  struct Folder {
    std::string path;
    Folder() {
      namespace fs = std::filesystem;
      const fs::path base = fs::is_directory("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
      path = (base / ("kvscope-fuzz-" + std::to_string(::getpid()))).string();
      fs::create_directories(path);
    }
    ~Folder() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  };
  static const Folder folder;
  return folder.path;
}

// Writes bytes to scratch_dir()/name and returns the path.
inline std::string scratch_file(const std::string& name, const uint8_t* data, size_t size) {
  const std::string path = scratch_dir() + "/" + name;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size > 0 && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  return path;
}

// Creates the folder scratch_dir()/folder holding `files` (name, bytes); returns its path.
inline std::string scratch_folder(const std::string& folder,
                                  std::initializer_list<std::pair<const char*, std::string_view>> files) {
  const std::string dir = scratch_dir() + "/" + folder;
  std::filesystem::create_directories(dir);
  for (const auto& [name, bytes] : files) {
    scratch_file(folder + "/" + name, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  return dir;
}

// Splits at the first NUL byte: {before, after}; after is empty when there is none.
inline std::pair<std::string_view, std::string_view> split_nul(const uint8_t* data, size_t size) {
  const std::string_view s(reinterpret_cast<const char*>(data), size);
  const size_t z = s.find('\0');
  if (z == std::string_view::npos) return {s, {}};
  return {s.substr(0, z), s.substr(z + 1)};
}

// Runs f, treating InputError as the expected rejection of bad input.
template <class F>
void expect_input_error_only(F&& f) {
  try {
    f();
  } catch (const InputError&) {
  }
}

// Encodes and decodes a fixed text with a fuzzed vocabulary.
inline void exercise_tokenizer(const Tokenizer& tok) {
  const std::vector<int> ids = tok.encode("Once upon a time, 42 cats\n said: \"héllo\" 🙂", true);
  (void)tok.decode(ids);
  for (int id = 0; id < std::min(tok.vocab_size(), 64); ++id) (void)tok.token_text(id);
}

inline void llama2c_model(const uint8_t* data, size_t size) {
  const std::string path = scratch_file("model.bin", data, size);
  expect_input_error_only([&] { (void)load_llama2c_model(path); });
}

inline void llama2c_tokenizer(const uint8_t* data, size_t size) {
  const std::string path = scratch_file("tokenizer.bin", data, size);
  expect_input_error_only([&] { exercise_tokenizer(*load_llama2c_tokenizer(path)); });
}

inline void sentencepiece_model(const uint8_t* data, size_t size) {
  const std::string path = scratch_file("tokenizer.model", data, size);
  expect_input_error_only([&] { exercise_tokenizer(*load_sentencepiece_model(path)); });
}

// GGUF container, then its tokenizer metadata and its model tensors, each on its own.
inline void gguf(const uint8_t* data, size_t size) {
  const std::string path = scratch_file("model.gguf", data, size);
  expect_input_error_only([&] {
    GgufFile file(path);
    expect_input_error_only([&] { exercise_tokenizer(*load_gguf_tokenizer(file)); });
    expect_input_error_only([&] { (void)load_gguf_model(path); });
  });
}

inline void json(const uint8_t* data, size_t size) {
  expect_input_error_only(
      [&] { (void)Json::parse(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.json"); });
}

// A chat template (a model file's text) rendered for one user message: jinja::Error is the answer
// to a bad one.
inline void chat_template(const uint8_t* data, size_t size) {
  using jinja::Value;
  const jinja::Dict context = {
      {"messages", Value::make_list({Value::make_dict({{"role", Value::string("user")}, {"content", Value::string("Hi")}})})},
      {"add_generation_prompt", Value::boolean(true)},
      {"tools", Value::none()},
      {"bos_token", Value::string("<s>")},
      {"eos_token", Value::string("</s>")}};
  try {
    (void)jinja::render(std::string(reinterpret_cast<const char*>(data), size), context);
  } catch (const jinja::Error&) {
  }
}

inline void safetensors(const uint8_t* data, size_t size) {
  const std::string path = scratch_file("model.safetensors", data, size);
  expect_input_error_only([&] {
    SafetensorsFile file(path);
    for (const auto& entry : file.tensors()) {
      const SafetensorsTensor& t = entry.second;
      std::vector<float> dst(t.elements());  // [elements], bounded by the checked byte range
      expect_input_error_only([&] { file.read_f32(t, dst.data()); });
    }
  });
}

// An HF folder: config.json, a NUL byte, then model.safetensors.
inline void hf_folder(const uint8_t* data, size_t size) {
  const auto [config, weights] = split_nul(data, size);
  const std::string dir = scratch_folder("hf", {{"config.json", config}, {"model.safetensors", weights}});
  expect_input_error_only([&] { (void)load_hf_model(dir); });
}

inline void tokenizer_json(const uint8_t* data, size_t size) {
  const std::string path =
      scratch_folder("tok", {{"tokenizer.json", {reinterpret_cast<const char*>(data), size}}}) + "/tokenizer.json";
  expect_input_error_only([&] { exercise_tokenizer(*load_tokenizer_json(path)); });
}

// A DuoAttention pattern folder: full_attention_heads.tsv, a NUL byte, then config.json.
inline void duo_pattern(const uint8_t* data, size_t size) {
  const auto parts = split_nul(data, size);
  const std::string_view tsv = parts.first, config = parts.second;  // tsv is captured below
  expect_input_error_only([&] { (void)parse_duo_tsv(std::string(tsv), "fuzz.tsv"); });
  const std::string dir = scratch_folder("duo", {{"full_attention_heads.tsv", tsv}, {"config.json", config}});
  expect_input_error_only([&] { (void)read_duo_pattern(dir); });
}

inline void retrieval_json(const uint8_t* data, size_t size) {
  expect_input_error_only([&] {
    const RetrievalScores s = parse_retrieval_scores(std::string(reinterpret_cast<const char*>(data), size), "fuzz.json");
    (void)s.mean();
  });
}

// Opens a trace and reads every dataset (the first and last few steps of per-step data, so a
// file declaring a huge but empty chunked dataset stays fast).
inline void read_whole_trace(const std::string& path) {
  expect_input_error_only([&] {
    TraceReader r(path);
    const TraceMeta& m = r.meta();
    (void)r.token_ids();
    (void)r.token_texts();
    (void)r.decode_query_pos();
    std::vector<float> rows, lse;  // [L, H, T], [L, H]
    const auto some_steps = [](int n) {
      std::vector<int> s;
      for (int i = 0; i < std::min(n, 3); ++i) s.push_back(i);
      if (n > 3) s.push_back(n - 1);
      return s;
    };
    for (int step : some_steps(m.n_steps)) r.read_decode_step(step, rows, lse);
    (void)r.read_prefill();
    if (m.shape.n_layers > 0 && m.shape.n_heads > 0) {
      (void)r.read_prefill_map(0, 0);
      (void)r.read_prefill_map(m.shape.n_layers - 1, m.shape.n_heads - 1);
    }
    for (const char* a : {"/heads/alpha", "/layers/similarity"})
      if (r.has_array(a)) (void)r.read_array(a);
    for (const std::string& name : r.run_names()) {
      expect_input_error_only([&] {
        (void)r.read_run(name, false);
        const int n = r.run_steps(name);
        std::vector<uint8_t> kept;  // [L, Hkv, T]
        for (int step : some_steps(n)) {
          r.read_run_kept_step(name, step, kept);
          r.read_run_attention_step(name, step, rows, lse);
        }
      });
    }
  });
}

// Raw bytes as a trace file: also exercises libhdf5's own parser (long runs only, see fuzz.sh).
inline void trace_bytes(const uint8_t* data, size_t size) { read_whole_trace(scratch_file("trace.h5", data, size)); }

// Edits applied through the HDF5 API to a valid trace (tests/fuzz/corpus/trace_bytes/with_runs_packed.h5,
// decode chunks as the writer packs them).
inline void trace(const uint8_t* data, size_t size) {
  static const std::string seed = [] {
    std::FILE* f = std::fopen(test::source_path("tests/fuzz/corpus/trace_bytes/with_runs_packed.h5").c_str(), "rb");
    if (!f) std::abort();
    std::string bytes;
    char buf[65536];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) bytes.append(buf, n);
    std::fclose(f);
    return bytes;
  }();
  const std::string path = scratch_file("edited.h5", reinterpret_cast<const uint8_t*>(seed.data()), seed.size());
  apply_trace_edits(path, data, size);
  read_whole_trace(path);
}

struct NamedEntry {
  const char* name;  // the target's name, also its folder under tests/fuzz/regressions/
  Entry fn;
};

inline const std::vector<NamedEntry>& all_entries() {
  static const std::vector<NamedEntry> entries = {
      {"llama2c_model", llama2c_model}, {"llama2c_tokenizer", llama2c_tokenizer},
      {"sentencepiece_model", sentencepiece_model},
      {"gguf", gguf},                   {"json", json},
      {"safetensors", safetensors},     {"hf_folder", hf_folder},
      {"tokenizer_json", tokenizer_json}, {"duo_pattern", duo_pattern},
      {"retrieval_json", retrieval_json}, {"trace", trace},
      {"trace_bytes", trace_bytes},     {"chat_template", chat_template},
  };
  return entries;
}

}  // namespace kvs::fuzz
