// SentencePiece ModelProto reader: a minimal protobuf wire-format walk over the fields
// sentencepiece_model.proto defines (ModelProto.pieces = 1, trainer_spec = 2, normalizer_spec = 3;
// SentencePiece.piece = 1, score = 2, type = 3; TrainerSpec.model_type = 3, unk/bos/eos_id =
// 40/41/42; NormalizerSpec.name = 1, add_dummy_prefix = 3, remove_extra_whitespaces = 4).
// Fields it does not use are skipped by their wire type.
#include "inference/sentencepiece_model.h"

#include <cstdint>
#include <cstring>
#include <string_view>

#include "inference/errors.h"
#include "inference/mapped_file.h"

namespace kvs {
namespace {

// One protobuf message's bytes, read field by field; `where` names it in errors.
class Wire {
 public:
  Wire(const std::string& path, const uint8_t* p, std::size_t n, std::string where)
      : path_(path), p_(p), end_(p + n), where_(std::move(where)) {}

  bool done() const { return p_ == end_; }

  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ == end_) fail("ends inside a number");
      const uint8_t b = *p_++;
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    fail("has a number longer than 10 bytes");
  }

  // The next field's number and wire type.
  std::pair<uint32_t, int> key() {
    const uint64_t k = varint();
    if ((k >> 3) == 0 || (k >> 3) > 0x1fffffff) fail("has field number " + std::to_string(k >> 3));
    return {static_cast<uint32_t>(k >> 3), static_cast<int>(k & 7)};
  }

  std::string_view bytes() {
    const uint64_t n = varint();
    if (n > static_cast<uint64_t>(end_ - p_)) fail("has a " + std::to_string(n) + "-byte field that runs past its end");
    const std::string_view s(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    return s;
  }

  float fixed32_float() {
    if (end_ - p_ < 4) fail("ends inside a float");
    float f;
    std::memcpy(&f, p_, 4);
    p_ += 4;
    return f;
  }

  void skip(int wire_type) {
    switch (wire_type) {
      case 0: varint(); return;
      case 1: advance(8); return;
      case 2: bytes(); return;
      case 5: advance(4); return;
      default: fail("has wire type " + std::to_string(wire_type));
    }
  }

  Wire sub(std::string_view s, std::string where) const {
    return Wire(path_, reinterpret_cast<const uint8_t*>(s.data()), s.size(), std::move(where));
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw input_error(path_, "not a SentencePiece model (" + where_ + " " + what + ")");
  }

 private:
  void advance(std::size_t n) {
    if (static_cast<std::size_t>(end_ - p_) < n) fail("ends inside a field");
    p_ += n;
  }

  const std::string& path_;
  const uint8_t* p_;
  const uint8_t* end_;
  std::string where_;
};

// A varint field read as the int32 protobuf stores (negative ids are 10-byte two's complement).
int as_int32(uint64_t v) { return static_cast<int>(static_cast<int32_t>(static_cast<uint32_t>(v))); }

}  // namespace

std::unique_ptr<SpmTokenizer> load_sentencepiece_model(const std::string& path) {
  MappedFile file(path);
  Wire model(path, file.data(), file.size(), "ModelProto");
  SpmVocab v;
  int model_type = 1;  // TrainerSpec's default: UNIGRAM
  bool remove_extra_whitespaces = true;
  std::string normalizer = "nmt_nfkc";
  v.add_space_prefix = true;
  v.match_control = false;  // SentencePieceProcessor.encode reads "<s>" in the text as characters
  v.unk_id = 0;
  v.bos_id = 1;
  v.eos_id = 2;
  while (!model.done()) {
    const auto [field, wire] = model.key();
    if (field == 1 && wire == 2) {  // SentencePiece
      Wire piece = model.sub(model.bytes(), "piece " + std::to_string(v.pieces.size()));
      std::string text;
      float score = 0.0f;
      int type = kTokenNormal;
      while (!piece.done()) {
        const auto [f, w] = piece.key();
        if (f == 1 && w == 2) text = std::string(piece.bytes());
        else if (f == 2 && w == 5) score = piece.fixed32_float();
        else if (f == 3 && w == 0) type = as_int32(piece.varint());
        else piece.skip(w);
      }
      if (type < kTokenNormal || type > kTokenByte) piece.fail("has type " + std::to_string(type));
      v.pieces.push_back(std::move(text));
      v.scores.push_back(score);
      v.types.push_back(type);
    } else if (field == 2 && wire == 2) {  // TrainerSpec
      Wire spec = model.sub(model.bytes(), "trainer_spec");
      while (!spec.done()) {
        const auto [f, w] = spec.key();
        if (w != 0) {
          spec.skip(w);
          continue;
        }
        const uint64_t value = spec.varint();
        if (f == 3) model_type = as_int32(value);
        else if (f == 40) v.unk_id = as_int32(value);
        else if (f == 41) v.bos_id = as_int32(value);
        else if (f == 42) v.eos_id = as_int32(value);
      }
    } else if (field == 3 && wire == 2) {  // NormalizerSpec
      Wire spec = model.sub(model.bytes(), "normalizer_spec");
      while (!spec.done()) {
        const auto [f, w] = spec.key();
        if (f == 1 && w == 2) normalizer = std::string(spec.bytes());
        else if (f == 3 && w == 0) v.add_space_prefix = spec.varint() != 0;
        else if (f == 4 && w == 0) remove_extra_whitespaces = spec.varint() != 0;
        else spec.skip(w);
      }
    } else {
      model.skip(wire);
    }
  }
  if (v.pieces.empty()) model.fail("holds no pieces");
  if (model_type != 2)
    throw input_error(path, "SentencePiece model type " + std::to_string(model_type) +
                                " (1 unigram, 3 word, 4 char) is not supported; BPE (2) only");
  if (normalizer == "identity") {
    v.normalization = UnicodeForm::None;
  } else if (normalizer == "nfkc" || normalizer == "nmt_nfkc") {
    v.normalization = UnicodeForm::NFKC;
  } else {
    throw input_error(path, "SentencePiece normalization \"" + normalizer +
                                "\" is not supported (identity, nfkc, nmt_nfkc)");
  }
  v.collapse_whitespace = remove_extra_whitespaces;
  const int n = static_cast<int>(v.pieces.size());
  if (v.unk_id < 0 || v.unk_id >= n)
    throw input_error(path, "SentencePiece unk_id " + std::to_string(v.unk_id) + " is outside the vocabulary of " +
                                std::to_string(n));
  for (const auto& [name, id] : {std::pair{"bos_id", v.bos_id}, {"eos_id", v.eos_id}})
    if (id >= n) throw input_error(path, std::string("SentencePiece ") + name + " " + std::to_string(id) +
                                             " is past the vocabulary of " + std::to_string(n));
  v.add_bos = v.bos_id >= 0;
  return std::make_unique<SpmTokenizer>(std::move(v));
}

}  // namespace kvs
