// TraceReader: opens a trace read-only, checks every dataset's shape against the root attributes
// before anything is read, and reads decode steps, prefill evidence, arrays and runs lazily.
// Every failure is an InputError("<path>: ...").
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "analysis/chunk_codec.h"
#include "analysis/float16.h"
#include "analysis/h5_isolation.h"
#include "analysis/h5_util.h"
#include "analysis/parallel_for.h"
#include "analysis/trace.h"
#include "analysis/trace_schema.h"
#include "inference/errors.h"
#include "inference/host_memory.h"

namespace kvs {

namespace ts = trace_schema;

struct TraceReader::Impl {
  std::string path;
  ts::SizeGuard guard;
  h5::Handle file;
  TraceMeta meta;
  std::vector<int32_t> qpos;  // [n_steps]
  int window = 0;             // W of /attention/prefill_window, 0 when absent
  bool has_lse = false, has_colsum = false, has_key_scores = false;
  int pool_block = 0;         // "block" of /attention/prefill_pooled, 0 when absent
  int n_pool = 0;             // its cells per side
  // Width of /attention/decode's chunks when they are [1, 1, H, width] with the writer's filters
  // (shuffle + deflate, float16 or float32 little-endian): steps are then unpacked here on several
  // threads. 0: HDF5 reads the steps itself (traces of other writers or older layouts).
  hsize_t packed_width = 0;
  mutable std::vector<StoredChunk> step_chunks;  // [L] a decode step's chunks as stored, reused

  template <class F>
  auto guarded(F&& body) const {
    std::lock_guard<std::recursive_mutex> lock(h5::mutex());
    h5::init();
    try {
      return body();
    } catch (const h5::Error& e) {
      if (e.out_of_memory)  // the host's fault, not the file's
        throw input_error(path, std::string("out of host memory reading it (") + e.what() + "; " +
                                    memory_size_text(host_memory_available()) + " available)");
      throw input_error(path, std::string("unreadable trace (") + e.what() + ")");
    }
  }

  // What the path is, before anything opens it: a FIFO would block the open (and the probe).
  struct stat stat_file() const {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0)  // worded as the model loader words it
      throw input_error(path, errno == ENOENT ? std::string("no such file") : std::strerror(errno));
    if (S_ISDIR(st.st_mode)) throw input_error(path, "is a folder, not a trace file");
    if (!S_ISREG(st.st_mode)) throw input_error(path, "not a regular file");
    return st;
  }

  void open_file() {
    const struct stat st = stat_file();
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw input_error(path, std::strerror(errno));
    ::close(fd);
    guard = {path, (uint64_t)st.st_size};
    if (H5Fis_hdf5(path.c_str()) <= 0) {
      H5Eclear2(H5E_DEFAULT);
      throw input_error(path, "not an HDF5 file");
    }
    h5::Handle fapl = h5::file_access();
    const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl);
    if (f < 0) {
      std::string reason;
      try {
        h5::check(f, "open");
      } catch (const h5::Error& e) {
        reason = e.what();
      }
      throw input_error(path, "corrupt or truncated HDF5 file (" + reason + ")");
    }
    file = h5::Handle(f, H5Fclose);
  }

  // Lets a forked child read the file first, through the same calls as this process will make:
  // libhdf5 1.10 can crash on deliberately corrupted files, and a crash there must become a
  // message here (h5_isolation.h).
  void probe_in_child() const;
  bool read_packed_step(hid_t decode, hsize_t s, std::vector<float>& rows) const;
  void check_decode_step(int step, std::span<const float> rows, std::span<const float> lse) const;
  // How long the probe may take: 60 s, or KVSCOPE_PROBE_TIMEOUT_S (1..600; the fuzzers use a few
  // seconds, since a corrupt file can keep libhdf5 busy until the limit).
  static unsigned probe_timeout_s() {
    const char* env = std::getenv("KVSCOPE_PROBE_TIMEOUT_S");
    const long v = env ? std::strtol(env, nullptr, 10) : 0;
    return v >= 1 && v <= 600 ? static_cast<unsigned>(v) : 60u;
  }

  // What the probe may allocate: 1 GiB (libhdf5's caches and a decompressed chunk; this writer's
  // chunks are at most 64 MB) plus the file's size.
  static uint64_t probe_memory_bytes(uint64_t file_size) { return (uint64_t{1} << 30) + file_size; }

  void check_identity() {
    if (!h5::has_attr(file, "format") || h5::attr_class(file, "format") != H5T_STRING ||
        h5::read_attr_string(file, "format") != ts::kFormat)
      throw input_error(path, "not a kvscope trace");
    if (!h5::has_attr(file, "schema_version")) throw input_error(path, "not a kvscope trace (no schema_version)");
    const int64_t v = h5::read_attr_int(file, "schema_version");
    if (v > kTraceSchemaVersion)
      throw input_error(path, "trace schema " + std::to_string(v) + " is newer than this KVScope (" +
                                  std::to_string(kTraceSchemaVersion) + ")");
    if (h5::has_attr(file, "complete") && h5::read_attr_int(file, "complete") == 0)
      throw input_error(path, "incomplete trace (the recording was interrupted before it was committed)");
  }

  void check_datasets() {
    const uint64_t L = meta.shape.n_layers, H = meta.shape.n_heads, Hkv = meta.shape.n_kv_heads;
    const uint64_t P = meta.prompt_len, n = meta.n_steps, T = meta.total_len();
    ts::expect_dims(file, ts::kTokenIds, H5T_INTEGER, {T}, path);
    ts::expect_dims(file, ts::kTokenText, H5T_STRING, {T}, path);
    ts::expect_dims(file, ts::kDecode, H5T_FLOAT, {n, L, H, T}, path);
    ts::expect_dims(file, ts::kDecodeQueryPos, H5T_INTEGER, {n}, path);
    has_lse = h5::path_exists(file, ts::kDecodeLse);
    if (has_lse) ts::expect_dims(file, ts::kDecodeLse, H5T_FLOAT, {n, L, H}, path);
    {
      h5::Handle ds = h5::open_dataset(file, ts::kDecode);
      const size_t size = h5::dataset_type_size(ds);
      meta.decode_dtype = size == 2 ? "float16" : size == 4 ? "float32" : "float64";
      h5::Handle f16 = h5::float16_type();
      const std::vector<hsize_t> c =
          h5::shuffle_deflate_chunk(ds, meta.decode_dtype == "float16" ? f16.get() : H5T_IEEE_F32LE);
      if (c.size() == 4 && c[0] == 1 && c[1] == 1 && c[2] == H && c[3] >= T) {
        if (n > 0) h5::check_chunks(ds);  // what read_box checks before every read, once here
        packed_width = c[3];
      }
    }
    guard.need(n, 4, ts::kDecodeQueryPos);
    qpos.resize(n);
    h5::read_all(h5::open_dataset(file, ts::kDecodeQueryPos), H5T_NATIVE_INT32, qpos.data());
    for (int32_t q : qpos)
      if (q < 0 || (uint64_t)q >= T)
        throw input_error(path, std::string(ts::kDecodeQueryPos) + " holds position " + std::to_string(q) +
                                    " outside 0.." + std::to_string(T - 1));
    has_colsum = h5::path_exists(file, ts::kPrefillColsum);
    if (has_colsum) ts::expect_dims(file, ts::kPrefillColsum, H5T_FLOAT, {L, H, P}, path);
    if (h5::path_exists(file, ts::kPrefillWindow)) {
      const auto d = ts::expect_dims(file, ts::kPrefillWindow, H5T_FLOAT, {L, H, ts::kAnyDim, P}, path);
      if (d[2] < 1 || d[2] > P)
        throw input_error(path, std::string(ts::kPrefillWindow) + " has a window of " + std::to_string(d[2]) +
                                    " rows for a prompt of " + std::to_string(P));
      window = (int)d[2];
      ts::expect_dims(file, ts::kPrefillWindowLse, H5T_FLOAT, {L, H, d[2]}, path);
    }
    has_key_scores = h5::path_exists(file, ts::kPrefillKeyScores);
    if (has_key_scores) ts::expect_dims(file, ts::kPrefillKeyScores, H5T_FLOAT, {L, Hkv, P}, path);
    if (h5::path_exists(file, ts::kPrefillPooled)) {
      const h5::Handle ds = h5::open_dataset(file, ts::kPrefillPooled);
      const int64_t block = h5::has_attr(ds, "block") ? h5::read_attr_int(ds, "block") : 0;
      if (block < 1 || (uint64_t)block > std::max<uint64_t>(P, 1))
        throw input_error(path, std::string(ts::kPrefillPooled) + " has block " + std::to_string(block) +
                                    " for a prompt of " + std::to_string(P) + " (want 1.." + std::to_string(P) + ")");
      pool_block = (int)block;
      n_pool = (int)((P + block - 1) / block);
      ts::expect_dims(file, ts::kPrefillPooled, H5T_FLOAT, {L, H, (uint64_t)n_pool, (uint64_t)n_pool}, path);
    }
    meta.has_prefill_map = h5::path_exists(file, ts::kPrefill);
    if (meta.has_prefill_map) ts::expect_dims(file, ts::kPrefill, H5T_FLOAT, {L, H, P, P}, path);
  }

  // Reads a whole float dataset whose shape was checked at open.
  std::vector<float> read_floats(const char* name, uint64_t count) const {
    guard.need(count, 4, name);
    std::vector<float> out(count);
    h5::read_all(h5::open_dataset(file, name), H5T_NATIVE_FLOAT, out.data());
    return out;
  }
};

TraceReader::TraceReader(const std::string& path) : TraceReader(path, true) {}

TraceReader::TraceReader(const std::string& path, bool probe_first) : impl_(std::make_unique<Impl>()) {
  Impl& r = *impl_;
  r.path = path;
  try {
    r.guarded([&] {
      h5::init();
      r.stat_file();
      if (probe_first) r.probe_in_child();
      r.open_file();
      r.check_identity();
      r.meta = ts::read_meta(r.file, path);
      r.check_datasets();
    });
  } catch (...) {
    std::lock_guard<std::recursive_mutex> lock(h5::mutex());
    impl_.reset();
    throw;
  }
}

TraceReader::~TraceReader() {
  std::lock_guard<std::recursive_mutex> lock(h5::mutex());
  h5::init();
  impl_.reset();
}

const TraceMeta& TraceReader::meta() const { return impl_->meta; }
const std::string& TraceReader::path() const { return impl_->path; }

std::vector<int32_t> TraceReader::token_ids() const {
  return impl_->guarded([&] {
    const uint64_t T = impl_->meta.total_len();
    impl_->guard.need(T, 4, ts::kTokenIds);
    std::vector<int32_t> ids(T);
    h5::read_all(h5::open_dataset(impl_->file, ts::kTokenIds), H5T_NATIVE_INT32, ids.data());
    return ids;
  });
}

std::vector<std::string> TraceReader::token_texts() const {
  return impl_->guarded([&] {
    const uint64_t T = impl_->meta.total_len();
    impl_->guard.need(T, 16, ts::kTokenText);
    return h5::read_strings(h5::open_dataset(impl_->file, ts::kTokenText), T);
  });
}

std::vector<int32_t> TraceReader::decode_query_pos() const { return impl_->qpos; }

// Reads step s's L chunks [H, packed_width] as stored, then unpacks them on the OpenMP threads
// into rows [L, H, T]. False when a chunk is missing or stored otherwise than the writer stores
// chunks (packed, or unfiltered at its full size): HDF5 reads the step then.
bool TraceReader::Impl::read_packed_step(hid_t decode, hsize_t s, std::vector<float>& rows) const {
  const hsize_t L = meta.shape.n_layers, H = meta.shape.n_heads, T = meta.total_len(), width = packed_width;
  const size_t elem = meta.decode_dtype == "float16" ? 2 : 4;
  const size_t raw_size = H * width * elem;
  std::vector<StoredChunk>& stored = step_chunks;
  stored.resize(L);
  for (hsize_t l = 0; l < L; ++l) {
    StoredChunk& c = stored[l];
    if (!h5::read_chunk(decode, {s, l, 0, 0}, guard.file_size, c.bytes, c.skipped)) return false;
    if (c.skipped == kSkipShuffleDeflate ? c.bytes.size() != raw_size : c.skipped != 0) return false;
    // deflate expands at most ~1032x: a larger declared chunk is corrupt, not allocated here
    if (c.skipped == 0 && raw_size > 1032 * c.bytes.size() + 1024) return false;
  }
  std::vector<uint8_t> ok(L, 0);  // [L] 1 once layer l unpacked
  parallel_for((int)L, [&](int l) {
    thread_local std::vector<uint8_t> unpacked;  // [H, width] elements
    const uint8_t* raw = stored[l].bytes.data();
    if (stored[l].skipped == 0) {
      unpacked.resize(raw_size);
      if (!unpack_shuffle_deflate(stored[l].bytes, elem, unpacked)) return;
      raw = unpacked.data();
    }
    for (hsize_t h = 0; h < H; ++h) {
      const uint8_t* src = raw + h * width * elem;
      float* dst = rows.data() + ((size_t)l * H + h) * T;
      if (elem == 2)
        halves_to_floats({reinterpret_cast<const uint16_t*>(src), T}, dst);
      else
        std::memcpy(dst, src, T * sizeof(float));
    }
    ok[l] = 1;
  }, L * raw_size >= (256u << 10));  // smaller steps unpack on this thread
  return std::find(ok.begin(), ok.end(), 0) == ok.end();
}

void TraceReader::read_decode_step(int step, std::vector<float>& rows, std::vector<float>& lse) const {
  const TraceMeta& m = impl_->meta;
  if (step < 0 || step >= m.n_steps)
    throw std::out_of_range("decode step " + std::to_string(step) + " of " + std::to_string(m.n_steps));
  impl_->guarded([&] {
    const hsize_t L = m.shape.n_layers, H = m.shape.n_heads, T = m.total_len(), s = step;
    impl_->guard.need(L * H * T, 4, ts::kDecode);
    rows.assign(L * H * T, 0.0f);
    h5::Handle decode = h5::open_dataset(impl_->file, ts::kDecode);
    if (!impl_->packed_width || !impl_->read_packed_step(decode, s, rows))
      h5::read_box(decode, H5T_NATIVE_FLOAT, {s, 0, 0, 0}, {1, L, H, T}, rows.data());
    lse.assign(L * H, 0.0f);
    if (impl_->has_lse)
      h5::read_box(h5::open_dataset(impl_->file, ts::kDecodeLse), H5T_NATIVE_FLOAT, {s, 0, 0}, {1, L, H}, lse.data());
  });
  impl_->check_decode_step(step, rows, lse);
}

// Policies and metrics read these rows as distributions: a NaN or a value outside [0, 1], or a
// row that does not sum to 1 within float16's rounding (a damaged, hand-edited or hand-written
// trace: a row scaled by 3 gave full's recall 1), is refused here, naming where it is, not
// carried into results.
void TraceReader::Impl::check_decode_step(int step, std::span<const float> rows, std::span<const float> lse) const {
  const size_t H = meta.shape.n_heads, T = meta.total_len(), L = meta.shape.n_layers;
  const auto outside = [](float v) { return !(v >= 0.0f && v <= 1.0f + 1e-3f); };  // NaN included
  constexpr float kSumTolerance = 1e-2f;
  std::vector<uint8_t> bad_layer(L, 0);  // [L] 1: a value outside [0, 1], 2: a row's sum
  std::vector<float> sums(L * H);        // [L, H] each row's sum, from the same pass as the values' check
  parallel_for((int)L, [&](int l) {
    int bad = 0;
    for (size_t h = 0; h < H; ++h) {
      const float* x = rows.data() + (l * H + h) * T;  // [T]
      float sum = 0.0f;
#pragma omp simd reduction(| : bad) reduction(+ : sum)
      for (size_t i = 0; i < T; ++i) {
        bad |= outside(x[i]);
        sum += x[i];
      }
      sums[l * H + h] = sum;
    }
    for (size_t h = 0; h < H && !bad; ++h) bad = std::fabs(sums[l * H + h] - 1.0f) > kSumTolerance ? 2 : 0;
    bad_layer[l] = (uint8_t)bad;
  }, rows.size() >= (1u << 18));
  const std::string where = std::string(ts::kDecode) + " step " + std::to_string(step) + " layer ";
  if (std::find(bad_layer.begin(), bad_layer.end(), 1) != bad_layer.end()) {
    const size_t i = std::find_if(rows.begin(), rows.end(), outside) - rows.begin();
    throw input_error(path, where + std::to_string(i / (H * T)) + " head " + std::to_string(i / T % H) + " key " +
                                std::to_string(i % T) + " holds " + std::to_string(rows[i]) + ", not a probability");
  }
  if (const auto l = std::find(bad_layer.begin(), bad_layer.end(), 2); l != bad_layer.end()) {
    const size_t layer = l - bad_layer.begin();
    for (size_t h = 0; h < H; ++h)
      if (const float sum = sums[layer * H + h]; std::fabs(sum - 1.0f) > kSumTolerance)
        throw input_error(path, where + std::to_string(layer) + " head " + std::to_string(h) + " sums to " +
                                    std::to_string(sum) + ", not 1 (not an attention row)");
  }
  for (size_t i = 0; i < lse.size(); ++i)
    if (!std::isfinite(lse[i]))
      throw input_error(path, std::string(ts::kDecodeLse) + " step " + std::to_string(step) + " layer " +
                                  std::to_string(i / H) + " head " + std::to_string(i % H) + " is not finite");
}

bool TraceReader::has_prefill_evidence() const { return impl_->has_colsum && impl_->window > 0; }

PrefillEvidence TraceReader::read_prefill() const {
  const Impl& r = *impl_;
  if (!has_prefill_evidence())
    throw input_error(r.path, "trace has no prefill evidence (/attention/prefill_colsum, prefill_window and "
                              "prefill_window_lse)");
  return r.guarded([&] {
    const TraceMeta& m = r.meta;
    const uint64_t L = m.shape.n_layers, H = m.shape.n_heads, P = m.prompt_len, W = r.window;
    PrefillEvidence ev;
    ev.shape = m.shape;
    ev.prompt_len = m.prompt_len;
    ev.window = r.window;
    ev.colsum = r.read_floats(ts::kPrefillColsum, L * H * P);
    ev.window_rows = r.read_floats(ts::kPrefillWindow, L * H * W * P);
    ev.window_lse = r.read_floats(ts::kPrefillWindowLse, L * H * W);
    if (r.has_key_scores) ev.key_scores = r.read_floats(ts::kPrefillKeyScores, L * (uint64_t)m.shape.n_kv_heads * P);
    return ev;
  });
}

std::vector<float> TraceReader::read_prefill_map(int layer, int head) const {
  const TraceMeta& m = impl_->meta;
  if (!m.has_prefill_map) return {};
  if (layer < 0 || layer >= m.shape.n_layers || head < 0 || head >= m.shape.n_heads)
    throw std::out_of_range("prefill map of layer " + std::to_string(layer) + " head " + std::to_string(head));
  return impl_->guarded([&] {
    const hsize_t P = m.prompt_len;
    impl_->guard.need(P * P, 4, ts::kPrefill);
    std::vector<float> map(P * P);  // [P, P]
    h5::read_box(h5::open_dataset(impl_->file, ts::kPrefill), H5T_NATIVE_FLOAT, {(hsize_t)layer, (hsize_t)head, 0, 0},
                 {1, 1, P, P}, map.data());
    return map;
  });
}

PooledMap TraceReader::read_prefill_pooled(int layer, int head) const {
  const Impl& r = *impl_;
  const TraceMeta& m = r.meta;
  if (r.pool_block == 0) return {};
  if (layer < 0 || layer >= m.shape.n_layers || head < 0 || head >= m.shape.n_heads)
    throw std::out_of_range("pooled prefill map of layer " + std::to_string(layer) + " head " + std::to_string(head));
  return r.guarded([&] {
    PooledMap pm;
    pm.block = r.pool_block;
    pm.n = r.n_pool;
    const hsize_t nb = pm.n;
    r.guard.need(nb * nb, 4, ts::kPrefillPooled);
    pm.cells.resize(nb * nb);
    h5::read_box(h5::open_dataset(r.file, ts::kPrefillPooled), H5T_NATIVE_FLOAT, {(hsize_t)layer, (hsize_t)head, 0, 0},
                 {1, 1, nb, nb}, pm.cells.data());
    return pm;
  });
}

bool TraceReader::has_array(const std::string& path) const {
  return impl_->guarded([&] { return h5::is_dataset(impl_->file, path); });
}

NamedArray TraceReader::read_array(const std::string& path) const {
  return impl_->guarded([&] { return ts::read_array(impl_->file, path, impl_->guard); });
}

bool TraceReader::has_attr(const std::string& path, const std::string& attr) const {
  return impl_->guarded([&] {
    if (!h5::path_exists(impl_->file, path)) return false;
    h5::Handle obj(h5::check(H5Oopen(impl_->file, path.c_str(), H5P_DEFAULT), path), H5Oclose);
    return h5::has_attr(obj, attr);
  });
}

std::string TraceReader::read_string_attr(const std::string& path, const std::string& attr) const {
  return impl_->guarded([&] {
    if (!h5::path_exists(impl_->file, path)) throw input_error(impl_->path, "no object " + path);
    h5::Handle obj(h5::check(H5Oopen(impl_->file, path.c_str(), H5P_DEFAULT), path), H5Oclose);
    if (!h5::has_attr(obj, attr)) throw input_error(impl_->path, path + " has no attribute " + attr);
    return h5::read_attr_string(obj, attr);
  });
}

std::vector<std::string> TraceReader::run_names() const {
  return impl_->guarded([&] { return ts::run_names(impl_->file); });
}

RunData TraceReader::read_run(const std::string& name, bool with_kept) const {
  return impl_->guarded([&] { return ts::read_run(impl_->file, name, with_kept, impl_->meta, impl_->guard); });
}

int TraceReader::run_steps(const std::string& name) const {
  return impl_->guarded([&] { return ts::run_steps(impl_->file, name, impl_->meta, impl_->guard); });
}

void TraceReader::read_run_kept_step(const std::string& name, int step, std::vector<uint8_t>& kept) const {
  const TraceMeta& m = impl_->meta;
  if (step < 0 || step >= m.n_steps)
    throw std::out_of_range("run step " + std::to_string(step) + " of " + std::to_string(m.n_steps));
  impl_->guarded([&] {
    const hsize_t L = m.shape.n_layers, Hkv = m.shape.n_kv_heads, T = m.total_len();
    const int n = ts::run_steps(impl_->file, name, m, impl_->guard);
    impl_->guard.need(L * Hkv * T, 1, "kept");
    kept.assign(L * Hkv * T, 0);
    if (step >= n) return;  // a run that stopped early holds nothing at later steps
    h5::read_box(h5::open_dataset(impl_->file, "/runs/" + name + "/kept"), H5T_NATIVE_UINT8, {(hsize_t)step, 0, 0, 0},
                 {1, L, Hkv, T}, kept.data());
  });
}

void TraceReader::read_run_attention_step(const std::string& name, int step, std::vector<float>& rows,
                                          std::vector<float>& lse) const {
  const TraceMeta& m = impl_->meta;
  if (step < 0 || step >= m.n_steps)
    throw std::out_of_range("run step " + std::to_string(step) + " of " + std::to_string(m.n_steps));
  impl_->guarded([&] {
    const hsize_t L = m.shape.n_layers, H = m.shape.n_heads, T = m.total_len(), s = step;
    const int n = ts::run_steps(impl_->file, name, m, impl_->guard);
    const std::string g = "/runs/" + name;
    rows.clear();
    lse.clear();
    if (step >= n || !h5::path_exists(impl_->file, g + "/attention")) return;
    ts::expect_dims(impl_->file, g + "/attention", H5T_FLOAT, {(hsize_t)n, L, H, T}, impl_->path);
    impl_->guard.need(L * H * T, 4, g + "/attention");
    rows.resize(L * H * T);
    h5::read_box(h5::open_dataset(impl_->file, g + "/attention"), H5T_NATIVE_FLOAT, {s, 0, 0, 0}, {1, L, H, T}, rows.data());
    if (!h5::path_exists(impl_->file, g + "/lse")) return;
    ts::expect_dims(impl_->file, g + "/lse", H5T_FLOAT, {(hsize_t)n, L, H}, impl_->path);
    lse.resize(L * H);
    h5::read_box(h5::open_dataset(impl_->file, g + "/lse"), H5T_NATIVE_FLOAT, {s, 0, 0}, {1, L, H}, lse.data());
  });
}


// The child opens the trace as this process would, reads tokens, the named arrays and every run's
// attributes, metrics and tokens, then walks every object header, attribute and string dataset
// and reads the first and last element of every numeric dataset (its chunk index at both ends).
// Bulk data is left to the parent: a probe must stay a small part of opening a large trace.
void TraceReader::Impl::probe_in_child() const {
  const h5::ProbeFailure failed = h5::run_isolated([this] {
    const TraceReader r(path, false);
    (void)r.token_ids();
    (void)r.token_texts();
    for (const char* a : {"/heads/alpha", "/layers/similarity"})
      if (r.has_array(a)) (void)r.read_array(a);
    for (const std::string& name : r.run_names()) {
      try {
        (void)r.read_run(name, false);
      } catch (const InputError&) {
        // the parent meets it again; the other runs still get read here
      }
    }
    h5::parse_all_metadata(r.impl_->file, r.impl_->guard.file_size);
  }, probe_timeout_s(), probe_memory_bytes(guard.file_size));
  if (failed.host_out_of_memory) throw input_error(path, failed.why);
  if (!failed.why.empty()) throw input_error(path, "corrupt HDF5 file: " + failed.why);
}

}  // namespace kvs
