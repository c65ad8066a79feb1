// Test helper: reads and writes .safetensors files tensor by tensor, and copies the small files
// of stories260K-hf (a config.json of the test's own) into a test folder, for the Hugging Face
// loader tests.
#pragma once
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "inference/json.h"
#include "loader_test_util.h"

namespace kvs::testing {

// A safetensors tensor to write: name, dtype, shape and raw bytes.
struct RawTensor {
  std::string name, dtype;
  std::vector<uint64_t> shape;
  std::vector<char> data;
};

inline std::vector<RawTensor> read_raw(const std::string& path) {
  const std::vector<char> bytes = read_bytes(path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  const Json header = Json::parse(std::string_view(bytes.data() + 8, n), path);
  std::vector<RawTensor> out;
  for (std::size_t i = 0; i < header.keys().size(); ++i) {
    if (header.keys()[i] == "__metadata__") continue;
    const Json& v = header.items()[i];
    RawTensor t{header.keys()[i], v.get_string("dtype", ""), {}, {}};
    for (const Json& d : v.find("shape")->items())
      t.shape.push_back(static_cast<uint64_t>(d.as_number()));
    const auto begin = static_cast<std::size_t>(v.find("data_offsets")->items()[0].as_number());
    const auto end = static_cast<std::size_t>(v.find("data_offsets")->items()[1].as_number());
    t.data.assign(bytes.begin() + 8 + n + begin, bytes.begin() + 8 + n + end);
    out.push_back(std::move(t));
  }
  return out;
}

inline void write_safetensors(const std::string& path, const std::vector<RawTensor>& tensors) {
  std::string header = "{";
  std::vector<char> data;
  for (const RawTensor& t : tensors) {
    if (header.size() > 1) header += ',';
    std::string shape;
    for (uint64_t d : t.shape) shape.append(shape.empty() ? "" : ",").append(std::to_string(d));
    const std::string begin = std::to_string(data.size());
    const std::string end = std::to_string(data.size() + t.data.size());
    header.append("\"").append(t.name).append("\":{\"dtype\":\"").append(t.dtype);
    header.append("\",\"shape\":[").append(shape).append("],\"data_offsets\":[");
    header.append(begin).append(",").append(end).append("]}");
    data.insert(data.end(), t.data.begin(), t.data.end());
  }
  header += '}';
  std::vector<char> file(8);
  const uint64_t n = header.size();
  std::memcpy(file.data(), &n, 8);
  file.insert(file.end(), header.begin(), header.end());
  file.insert(file.end(), data.begin(), data.end());
  write_bytes(path, file);
}

// Copies stories260K-hf's small files into `dir` (config.json optionally replaced).
inline void copy_side_files(const TempDir& dir, const std::string& config = "") {
  for (const char* f : {"config.json", "tokenizer.json", "tokenizer_config.json"}) {
    std::filesystem::copy_file(shared_model(std::string("stories260K-hf/") + f), dir.file(f));
  }
  if (!config.empty()) {
    std::filesystem::remove(dir.file("config.json"));
    write_bytes(dir.file("config.json"), config.data(), config.size());
  }
}

inline std::string hf_config() {
  const std::vector<char> c = read_bytes(shared_model("stories260K-hf/config.json"));
  return std::string(c.begin(), c.end());
}

// config.json with `key`'s value replaced by `value` (the key must be present).
inline std::string config_with(std::string config, const std::string& key, const std::string& value) {
  const std::size_t at = config.find("\"" + key + "\":");
  const std::size_t start = config.find(':', at) + 1;
  const std::size_t first = config.find_first_not_of(" \n", start);
  const std::size_t end =
      config[first] == '[' ? config.find(']', first) + 1 : config.find_first_of(",\n}", start);
  config.replace(start, end - start, " " + value);
  return config;
}

// A model folder in `dir`: stories260K-hf's weights and small files, `config` as its config.json.
inline void copy_with_weights(const TempDir& dir, const std::string& config) {
  copy_side_files(dir, config);
  std::filesystem::copy_file(shared_model("stories260K-hf/model.safetensors"), dir.file("model.safetensors"));
}

}  // namespace kvs::testing
