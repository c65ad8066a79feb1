// Trace root attributes <-> TraceMeta, shape checks of datasets, and the read-size guard.
#include <ctime>

#include "analysis/h5_util.h"
#include "analysis/trace_schema.h"
#include "inference/errors.h"

namespace kvs::trace_schema {

namespace {

// Limits a sane trace stays far below; anything past them is a corrupt or hostile header.
constexpr int64_t kMaxLayers = 4096;
constexpr int64_t kMaxHeads = 4096;
constexpr int64_t kMaxHeadDim = 65536;
constexpr int64_t kMaxPositions = 1 << 24;
constexpr int64_t kMaxVocab = 1 << 28;

std::string now_iso8601() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

void SizeGuard::need(uint64_t elements, uint64_t elem_bytes, const std::string& what) const {
  const uint64_t limit = (64ull << 20) + 1100ull * file_size;  // bytes one read may allocate
  if (elements > limit / (elem_bytes ? elem_bytes : 1))
    throw input_error(path, what + " claims " + std::to_string(elements) + " values, more than a file of " +
                                std::to_string(file_size) + " bytes can hold");
}

uint64_t checked_product(const std::vector<uint64_t>& dims, const std::string& path, const std::string& what) {
  uint64_t n = 1;
  for (uint64_t d : dims) {
    if (d != 0 && n > (1ull << 62) / d) throw input_error(path, what + " has an impossible shape " + dims_text(dims));
    n *= d;
  }
  return n;
}

std::string dims_text(const std::vector<uint64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(dims[i]);
  }
  return s + "]";
}

std::vector<uint64_t> expect_dims(hid_t file, const std::string& name, H5T_class_t cls,
                                  const std::vector<uint64_t>& expected, const std::string& path) {
  if (!h5::is_dataset(file, name)) throw input_error(path, "missing dataset " + name);
  h5::Handle ds = h5::open_dataset(file, name);
  const H5T_class_t actual = h5::dataset_class(ds);
  if (actual != cls) {
    const char* want = cls == H5T_FLOAT ? "float" : cls == H5T_INTEGER ? "integer" : "string";
    throw input_error(path, name + " is not a " + std::string(want) + " dataset");
  }
  const std::vector<hsize_t> got = h5::dataset_dims(ds);
  std::vector<uint64_t> dims(got.begin(), got.end());
  bool ok = dims.size() == expected.size();
  for (size_t i = 0; ok && i < dims.size(); ++i) ok = expected[i] == kAnyDim || expected[i] == dims[i];
  if (!ok) {
    std::string want = "[";
    for (size_t i = 0; i < expected.size(); ++i) {
      if (i) want += ',';
      want += expected[i] == kAnyDim ? std::string("*") : std::to_string(expected[i]);
    }
    throw input_error(path, name + " has shape " + dims_text(dims) + ", expected " + want + "]");
  }
  return dims;
}

void write_meta(hid_t file, const TraceMeta& m, bool complete) {
  h5::write_attr(file, "format", kFormat);
  h5::write_attr_int(file, "schema_version", m.schema_version);
  h5::write_attr(file, "writer_version", m.writer_version);
  h5::write_attr(file, "created", m.created.empty() ? now_iso8601() : m.created);
  h5::write_attr(file, "model", m.model);
  h5::write_attr(file, "model_path", m.model_path);
  h5::write_attr(file, "tokenizer_path", m.tokenizer_path);
  h5::write_attr(file, "arch", m.arch);
  h5::write_attr(file, "device", m.device);
  h5::write_attr(file, "device_dtype", m.device_dtype);
  h5::write_attr_int(file, "n_layers", m.shape.n_layers);
  h5::write_attr_int(file, "n_heads", m.shape.n_heads);
  h5::write_attr_int(file, "n_kv_heads", m.shape.n_kv_heads);
  h5::write_attr_int(file, "head_dim", m.shape.head_dim);
  h5::write_attr_int(file, "vocab_size", m.vocab_size);
  h5::write_attr_int(file, "prompt_len", m.prompt_len);
  h5::write_attr_int(file, "n_steps", m.n_steps);
  h5::write_attr(file, "prompt", m.prompt);
  h5::write_attr_float(file, "temperature", m.temperature);
  h5::write_attr_float(file, "top_p", m.top_p);
  h5::write_attr_u64(file, "seed", m.seed);
  h5::write_attr(file, "decode_dtype", m.decode_dtype);
  h5::write_attr_int(file, "has_prefill_map", m.has_prefill_map ? 1 : 0);
  h5::write_attr(file, "capture_note", m.capture_note);
  if (!m.recorded_under.empty()) h5::write_attr(file, "recorded_under", m.recorded_under);
  h5::write_attr_int(file, "complete", complete ? 1 : 0);
}

TraceMeta read_meta(hid_t file, const std::string& path) {
  auto text = [&](const char* name, const std::string& fallback) {
    return h5::has_attr(file, name) ? h5::read_attr_string(file, name) : fallback;
  };
  auto integer = [&](const char* name, int64_t lo, int64_t hi, bool required) -> int {
    if (!h5::has_attr(file, name)) {
      if (required) throw input_error(path, std::string("missing root attribute ") + name);
      return 0;
    }
    const int64_t v = h5::read_attr_int(file, name);
    if (v < lo || v > hi)
      throw input_error(path, std::string("root attribute ") + name + " = " + std::to_string(v) +
                                  " is outside " + std::to_string(lo) + ".." + std::to_string(hi));
    return (int)v;
  };
  TraceMeta m;
  m.schema_version = integer("schema_version", 1, kTraceSchemaVersion, true);
  m.writer_version = text("writer_version", "");
  m.created = text("created", "");
  m.model = text("model", "");
  m.model_path = text("model_path", "");
  m.tokenizer_path = text("tokenizer_path", "");
  m.arch = text("arch", "");
  m.device = text("device", "");
  m.device_dtype = text("device_dtype", "");
  m.shape.n_layers = integer("n_layers", 1, kMaxLayers, true);
  m.shape.n_heads = integer("n_heads", 1, kMaxHeads, true);
  m.shape.n_kv_heads = integer("n_kv_heads", 1, m.shape.n_heads, true);
  if (m.shape.n_heads % m.shape.n_kv_heads != 0)
    throw input_error(path, "n_heads " + std::to_string(m.shape.n_heads) + " is not a multiple of n_kv_heads " +
                                std::to_string(m.shape.n_kv_heads));
  m.shape.head_dim = integer("head_dim", 1, kMaxHeadDim, true);
  m.vocab_size = integer("vocab_size", 0, kMaxVocab, false);
  m.prompt_len = integer("prompt_len", 1, kMaxPositions, true);
  m.n_steps = integer("n_steps", 0, kMaxPositions - m.prompt_len, true);
  m.prompt = text("prompt", "");
  m.temperature = h5::has_attr(file, "temperature") ? (float)h5::read_attr_double(file, "temperature") : 0.0f;
  m.top_p = h5::has_attr(file, "top_p") ? (float)h5::read_attr_double(file, "top_p") : 1.0f;
  m.seed = h5::has_attr(file, "seed") ? h5::read_attr_u64(file, "seed") : 0;
  m.decode_dtype = text("decode_dtype", "float32");
  m.has_prefill_map = integer("has_prefill_map", 0, 1, false) == 1;
  m.capture_note = text("capture_note", "");
  m.recorded_under = text("recorded_under", "");
  return m;
}

}  // namespace kvs::trace_schema
