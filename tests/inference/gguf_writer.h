// Test helper: writes small GGUF v3 files (metadata + tensors with raw data) for the loader tests.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "loader_test_util.h"

namespace kvs::testing {

class GgufWriter {
 public:
  void add_string(const std::string& key, const std::string& value) {
    key_header(key, 8);
    put_string(kv_, value);
    ++n_kv_;
  }
  void add_u32(const std::string& key, uint32_t value) {
    key_header(key, 4);
    put(kv_, value);
    ++n_kv_;
  }
  void add_u64(const std::string& key, uint64_t value) {
    key_header(key, 10);
    put(kv_, value);
    ++n_kv_;
  }
  void add_f32(const std::string& key, float value) {
    key_header(key, 6);
    put(kv_, value);
    ++n_kv_;
  }
  void add_bool(const std::string& key, bool value) {
    key_header(key, 7);
    put(kv_, static_cast<uint8_t>(value));
    ++n_kv_;
  }
  void add_strings(const std::string& key, const std::vector<std::string>& values) {
    key_header(key, 9);
    put(kv_, uint32_t{8});
    put(kv_, static_cast<uint64_t>(values.size()));
    for (const std::string& v : values) put_string(kv_, v);
    ++n_kv_;
  }
  void add_bools(const std::string& key, const std::vector<bool>& values) {
    key_header(key, 9);
    put(kv_, uint32_t{7});
    put(kv_, static_cast<uint64_t>(values.size()));
    for (const bool v : values) put(kv_, static_cast<uint8_t>(v));
    ++n_kv_;
  }
  void add_i32s(const std::string& key, const std::vector<int32_t>& values) {
    key_header(key, 9);
    put(kv_, uint32_t{5});
    put(kv_, static_cast<uint64_t>(values.size()));
    for (int32_t v : values) put(kv_, v);
    ++n_kv_;
  }
  void add_f32s(const std::string& key, const std::vector<float>& values) {
    key_header(key, 9);
    put(kv_, uint32_t{6});
    put(kv_, static_cast<uint64_t>(values.size()));
    for (float v : values) put(kv_, v);
    ++n_kv_;
  }
  // Adds a tensor of GGML type `type` with dims (ne0 first) and its raw bytes.
  void add_tensor(const std::string& name, std::vector<uint64_t> dims, uint32_t type,
                  const std::vector<uint8_t>& data) {
    while (data_.size() % 32 != 0) data_.push_back(0);
    put_string(infos_, name);
    put(infos_, static_cast<uint32_t>(dims.size()));
    for (uint64_t d : dims) put(infos_, d);
    put(infos_, type);
    put(infos_, static_cast<uint64_t>(data_.size()));
    data_.insert(data_.end(), data.begin(), data.end());
    ++n_tensors_;
  }
  void add_f32_tensor(const std::string& name, std::vector<uint64_t> dims,
                      const std::vector<float>& v) {
    std::vector<uint8_t> bytes(v.size() * 4);
    std::memcpy(bytes.data(), v.data(), bytes.size());
    add_tensor(name, std::move(dims), 0, bytes);
  }

  std::vector<char> bytes() const {
    const std::size_t head = 24 + kv_.size() + infos_.size();
    const std::size_t data_start = (head + 31) / 32 * 32;
    std::vector<char> out(data_start + data_.size(), 0);
    const uint32_t version = 3;
    char* p = out.data();
    std::memcpy(p, "GGUF", 4);
    std::memcpy(p + 4, &version, 4);
    std::memcpy(p + 8, &n_tensors_, 8);
    std::memcpy(p + 16, &n_kv_, 8);
    std::copy(kv_.begin(), kv_.end(), p + 24);
    std::copy(infos_.begin(), infos_.end(), p + 24 + kv_.size());
    std::copy(data_.begin(), data_.end(), p + data_start);
    return out;
  }
  void write(const std::string& path) const { write_bytes(path, bytes()); }

 private:
  template <typename Buf, typename T>
  static void put(Buf& buf, T v) {
    const char* p = reinterpret_cast<const char*>(&v);
    buf.insert(buf.end(), p, p + sizeof(T));
  }
  template <typename Buf>
  static void put_string(Buf& buf, const std::string& s) {
    put(buf, static_cast<uint64_t>(s.size()));
    buf.insert(buf.end(), s.begin(), s.end());
  }
  void key_header(const std::string& key, uint32_t type) {
    put_string(kv_, key);
    put(kv_, type);
  }

  std::vector<char> kv_, infos_;
  std::vector<uint8_t> data_;
  uint64_t n_kv_ = 0, n_tensors_ = 0;
};

// A llama GGUF (dim 16, one head of 16, hidden 8, vocab 4, every weight 0.25) with the tensors of
// `layers` layers and the metadata embedding_length, feed_forward_length, block_count (= layers)
// and head_count, less the keys in `omit`. Callers add more metadata or tensors, then write.
inline GgufWriter tiny_llama_writer(int layers, const std::set<std::string>& omit = {}) {
  GgufWriter w;
  w.add_string("general.architecture", "llama");
  const std::pair<const char*, uint32_t> defaults[] = {
      {"llama.embedding_length", 16},
      {"llama.feed_forward_length", 8},
      {"llama.block_count", static_cast<uint32_t>(layers)},
      {"llama.attention.head_count", 1}};
  for (const auto& [key, value] : defaults)
    if (!omit.count(key)) w.add_u32(key, value);
  auto t = [&](const std::string& tensor, std::vector<uint64_t> dims) {
    uint64_t n = 1;
    for (uint64_t d : dims) n *= d;
    w.add_f32_tensor(tensor, std::move(dims), std::vector<float>(n, 0.25f));
  };
  t("token_embd.weight", {16, 4});
  t("output_norm.weight", {16});
  for (int l = 0; l < layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    for (const char* m : {"attn_q", "attn_k", "attn_v", "attn_output"}) t(b + m + ".weight", {16, 16});
    t(b + "attn_norm.weight", {16});
    t(b + "ffn_norm.weight", {16});
    t(b + "ffn_gate.weight", {16, 8});
    t(b + "ffn_up.weight", {16, 8});
    t(b + "ffn_down.weight", {8, 16});
  }
  return w;
}

}  // namespace kvs::testing
