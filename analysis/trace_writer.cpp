// TraceWriter: records a trace step by step into "<final>.tmp-<pid>-<random>" (flushed after
// every decode step) and publishes it with fsync + rename on commit. Any failure removes the
// temporary file and surfaces as InputError("<final path>: cannot write trace (<reason>)").
// The bulk attention (decode rows, the full prefill map) is stored in shuffle + deflate chunks
// that this writer packs itself on the OpenMP threads (analysis/chunk_codec.h) and hands to
// HDF5 ready-made: HDF5 would compress them one at a time, on the writing thread. float32 decode
// chunks mostly full of values are stored unpacked (worth_packing).
#include <sys/stat.h>

#include <cstring>
#include <optional>
#include <stdexcept>

#include "analysis/atomic_file.h"
#include "analysis/chunk_codec.h"
#include "analysis/float16.h"
#include "analysis/h5_direct_driver.h"
#include "analysis/h5_util.h"
#include "analysis/parallel_for.h"
#include "analysis/trace.h"
#include "analysis/trace_schema.h"
#include "inference/errors.h"

namespace kvs {

namespace ts = trace_schema;

namespace {

constexpr int kDeflateLevel = 1;  // libdeflate's level 1 packs attention rows as zlib's level 4
constexpr size_t kParallelBytes = 256 << 10;  // raw bytes below which one thread packs a step
// Bytes a recording grows by between h5::stream_to_disk's rounds. Every step cost more than it
// saved (capture +11 … +19% of decode on the stories110M shape, from +3 … +11%); 64 MiB keeps
// that shape's cost and cut SmolLM2's at 4K keys (4.5 MB a step) from +41 … +68% to +13.5 …
// +19.3%, the page cache holding at most ~128 MiB of the trace.
constexpr off_t kStreamBatch = off_t{64} << 20;

// Whether a decode chunk of fp16 or fp32 (elem 2 or 4) elements whose rows hold `len` values of
// `width` is worth packing while decode waits. float32 attention values shrink by only ~14% in
// shuffle + deflate (their two low mantissa bytes are noise) and libdeflate packs ~110 MB/s on a
// core: at 4K keys on SmolLM2 that doubled a decode step. So a float32 chunk at least half full
// of values is stored as it is; one mostly of zeros (the tail of a long generation's early rows)
// is packed by pack_shuffle_zero_runs, its zeros collapsed and its values stored as they are
// (with libdeflate's level 1 the writer took 1.6 ms of a core a step on SmolLM2 after a short
// prompt, a sixth of the decode time on two cores). fp16 rows, chosen to keep a trace small, are
// always packed with libdeflate (values ~1.45x). The prefill window rows, the last W rows of the
// prompt's map, are always at least half full and stored as they are (packing them took 2.2 s of
// a core to save 16% of 242 MB at 3,503 keys on SmolLM2); the pooled and full maps, causal, are
// half zeros and always packed.
bool worth_packing(size_t len, size_t width, size_t elem) { return elem == 2 || 2 * len < width; }

// Fills `chunk` with the stored chunk of `rows` rows x `width` elements of fp16 or fp32 (elem 2
// or 4) whose row r holds src[r * src_stride .. + len) and zeros after (len <= width), packed or
// not. An unpacked chunk reuses chunk.bytes (a decode step's chunks are kept between steps: fresh
// ones paid their page faults, 4.5 MB a step at 4K keys on SmolLM2).
void pack_rows(const float* src, size_t rows, size_t len, size_t src_stride, size_t width, size_t elem, bool pack,
               StoredChunk& chunk) {
  thread_local std::vector<uint8_t> scratch;  // [rows, width] elements, the chunk before packing
  std::vector<uint8_t>& raw = pack ? scratch : chunk.bytes;
  raw.resize(rows * width * elem);
  for (size_t r = 0; r < rows; ++r) {
    uint8_t* dst = raw.data() + r * width * elem;
    if (elem == 2)
      floats_to_halves({src + r * src_stride, len}, reinterpret_cast<uint16_t*>(dst));
    else
      std::memcpy(dst, src + r * src_stride, len * sizeof(float));
    std::memset(dst + len * elem, 0, (width - len) * elem);
  }
  chunk.skipped = pack ? 0 : kSkipShuffleDeflate;
  if (pack) chunk.bytes = elem == 4 ? pack_shuffle_zero_runs(raw, elem) : pack_shuffle_deflate(raw, elem, kDeflateLevel);
}

std::span<const uint8_t> float_bytes(const float* p, size_t n) { return {reinterpret_cast<const uint8_t*>(p), n * sizeof(float)}; }

// Creates dataset `name` [L, H, R, C] of file type `type` (fp16 or fp32, elem 2 or 4) from
// data[L, H, R, C] in one shuffle + deflate chunk per (layer, head), packed (when `pack`) here a
// layer at a time on every thread (HDF5 would deflate the chunks one by one with zlib: a tenth of
// a long prompt's prefill for the window rows and the pooled map), else stored as they are.
void write_head_chunks(hid_t file, const char* name, hid_t type, const float* data, hsize_t L, hsize_t H, hsize_t R,
                       hsize_t C, size_t elem, bool pack) {
  h5::Handle ds = h5::create_dataset(file, name, type, {L, H, R, C}, {{}, {1, 1, R, C}, kDeflateLevel});
  if (!pack && elem == 4) {  // each (layer, head)'s [R, C] floats are its chunk as stored: no copy
    for (hsize_t l = 0; l < L; ++l)
      for (hsize_t h = 0; h < H; ++h)
        h5::write_chunk(ds, {l, h, 0, 0}, float_bytes(data + (l * H + h) * R * C, R * C), kSkipShuffleDeflate);
    ds.close(name);
    return;
  }
  std::vector<StoredChunk> chunks(H);
  for (hsize_t l = 0; l < L; ++l) {
    parallel_for((int)H, [&](int h) { pack_rows(data + (l * H + h) * R * C, R, C, C, C, elem, pack, chunks[h]); },
                 pack);
    for (hsize_t h = 0; h < H; ++h) h5::write_chunk(ds, {l, h, 0, 0}, chunks[h].bytes, chunks[h].skipped);
  }
  ds.close(name);
}

}  // namespace

struct TraceWriter::Impl {
  std::string final_path;
  std::string target;  // what commit() replaces: final_path, or the file its symbolic link leads to
  std::optional<struct stat> replaced;  // the earlier trace there, whose mode and owner the new one keeps
  std::string temp;
  TraceMeta meta;        // as given at construction; shape and prompt_len are fixed from here on
  int max_steps = 0;
  hsize_t L = 0, H = 0, P = 0, T_alloc = 0;  // T_alloc = P + max_steps: longest possible row
  h5::Handle file;
  h5::Handle decode;      // [steps, L, H, row_len] extendible on axes 0 and 3
  h5::Handle decode_lse;  // [steps, L, H]
  h5::Handle query_pos;   // [steps]
  h5::Handle f16;         // the float16 type, in memory and on disk (no HDF5 conversion)
  std::vector<int32_t> qpos;  // [steps] query position of each written step
  hsize_t row_len = 0;        // current extent of decode's last axis
  std::vector<RunData> runs;  // written at commit, when T is final
  std::vector<StoredChunk> step_chunks;  // [L] the last decode step's chunks, reused by the next
  off_t written_to = 0;   // the file's size at the last stream_to_disk
  bool committed = false;
  bool failed = false;

  // Drops every handle and the temporary file; the writer is unusable afterwards.
  void discard() {
    if (file.valid()) h5::divert_writes(file);
    query_pos.reset();
    f16.reset();
    decode_lse.reset();
    decode.reset();
    file.reset();
    if (!temp.empty()) remove_quietly(temp);
    temp.clear();
  }

  template <class F>
  void guarded(const char* action, F&& body) {
    std::lock_guard<std::recursive_mutex> lock(h5::mutex());
    h5::init();
    if (committed) throw std::logic_error("TraceWriter: already committed");
    if (failed) throw input_error(final_path, "trace writer stopped after an earlier error");
    try {
      body();
    } catch (const InputError&) {
      failed = true;
      discard();
      throw;
    } catch (const std::runtime_error& e) {  // h5::Error, FileError
      failed = true;
      discard();
      throw input_error(final_path, std::string(action) + " (" + e.what() + ")");
    }
  }

  void create_datasets() {
    const hsize_t elem = decode_elem();
    if (H * T_alloc * elem >= (4ull << 30))
      throw input_error(final_path, "one layer's decode rows of " + std::to_string(H * T_alloc * elem >> 20) +
                                        " MiB exceed HDF5's 4 GiB chunk limit; record fewer steps");
    f16 = h5::float16_type();
    const hid_t row_type = elem == 2 ? f16.get() : H5T_IEEE_F32LE;
    row_len = P;
    // One chunk per (step, layer), as wide as the longest row, packed by write_decode_step.
    decode = h5::create_dataset(file, ts::kDecode, row_type, {0, L, H, row_len},
                                {{H5S_UNLIMITED, L, H, H5S_UNLIMITED}, {1, 1, H, T_alloc}, kDeflateLevel});
    // Unfiltered: HDF5 deflated a step's lse chunk again at every step (~2% of the writer's
    // thread, which shares the cores with decode), for a few percent of 4 bytes per row.
    decode_lse = h5::create_dataset(file, ts::kDecodeLse, H5T_IEEE_F32LE, {0, L, H},
                                    {{H5S_UNLIMITED, L, H}, {16, L, H}, 0});
    query_pos = h5::create_dataset(file, ts::kDecodeQueryPos, H5T_STD_I32LE, {0}, {{H5S_UNLIMITED}, {256}, 0});
  }

  void flush() { h5::check(H5Fflush(file, H5F_SCOPE_LOCAL), "flush"); }
  hsize_t decode_elem() const { return meta.decode_dtype == "float16" ? 2 : 4; }
};

TraceWriter::TraceWriter(const std::string& final_path, const TraceMeta& meta, int max_steps)
    : impl_(std::make_unique<Impl>()) {
  Impl& w = *impl_;
  const ModelShape& s = meta.shape;
  if (s.n_layers <= 0 || s.n_heads <= 0 || s.n_kv_heads <= 0 || s.n_heads % s.n_kv_heads != 0 || s.head_dim <= 0)
    throw std::invalid_argument("TraceWriter: invalid model shape");
  if (meta.prompt_len <= 0 || max_steps < 0) throw std::invalid_argument("TraceWriter: invalid prompt_len or max_steps");
  if (meta.decode_dtype != "float32" && meta.decode_dtype != "float16")
    throw std::invalid_argument("TraceWriter: decode_dtype must be float32 or float16, not " + meta.decode_dtype);
  w.final_path = final_path;
  w.meta = meta;
  w.meta.n_steps = 0;
  w.max_steps = max_steps;
  w.L = s.n_layers;
  w.H = s.n_heads;
  w.P = meta.prompt_len;
  w.T_alloc = (hsize_t)decode_row_width(meta.prompt_len, max_steps);

  std::lock_guard<std::recursive_mutex> lock(h5::mutex());
  h5::init();
  if (final_path.empty()) throw input_error("trace", "no output path given");
  // Replacing an earlier trace is routine; replacing anything else (a model, a tokenizer, the
  // prompt file, a user's notes given to --out by mistake, a device or FIFO) would lose it.
  w.target = output_target(final_path);
  struct stat st;
  if (::stat(w.target.c_str(), &st) == 0) {
    if (st.st_size > 0 && H5Fis_hdf5(w.target.c_str()) <= 0) {
      H5Eclear2(H5E_DEFAULT);
      throw input_error(final_path, "exists and is not an HDF5 trace; not replacing it (remove it or choose another name)");
    }
    require_owner_write(final_path, st, "replacing");  // as appends refuse it
    w.replaced = st;  // the new trace keeps its permissions and owner
  }
  remove_stale_temps(w.target);
  const std::string temp = temp_sibling(w.target);
  try {
    create_exclusive(temp);
  } catch (const FileError& e) {
    throw input_error(final_path, std::string("cannot create trace (") + e.what() + ")");
  }
  w.temp = temp;
  w.guarded("cannot create trace", [&] {
    h5::Handle fapl = h5::file_access();
    h5::use_direct_driver(fapl);
    w.file = h5::file_handle(H5Fcreate(temp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl), "create");
    w.create_datasets();
    ts::write_meta(w.file, w.meta, false);
    w.flush();
  });
}

TraceWriter::~TraceWriter() {
  std::lock_guard<std::recursive_mutex> lock(h5::mutex());
  h5::init();
  if (!impl_->committed) impl_->discard();
}

const std::string& TraceWriter::temp_path() const { return impl_->temp; }

void TraceWriter::write_decode_step(int step, int q_pos, std::span<const float> rows, std::span<const float> lse) {
  Impl& w = *impl_;
  const hsize_t LH = w.L * w.H;
  if (step != (int)w.qpos.size() || step >= w.max_steps)
    throw std::logic_error("TraceWriter: decode step " + std::to_string(step) + " out of order (expected " +
                           std::to_string(w.qpos.size()) + ", max " + std::to_string(w.max_steps) + ")");
  const hsize_t stride = rows.size() / LH;  // each row's length as given: q_pos + 1 or more (zeros)
  if (rows.size() % LH != 0 || stride == 0 || stride > w.T_alloc || q_pos < (int)w.P || (hsize_t)q_pos >= stride ||
      lse.size() != LH)
    throw std::invalid_argument("TraceWriter: decode step " + std::to_string(step) + " has rows/lse of the wrong size");
  const hsize_t len = (hsize_t)q_pos + 1;  // this row's keys: 0..q_pos
  const bool pack = worth_packing(len, w.T_alloc, w.decode_elem());
  // Rows given as wide as the chunks (the recorder's) are the chunks as stored when unpacked;
  // else packed outside HDF5's lock: [L] chunks of [H, T_alloc], on every thread when there is
  // much to pack (a copy into unpacked chunks is not worth waking them).
  const bool as_given = !pack && w.decode_elem() == 4 && stride == w.T_alloc;
  std::vector<StoredChunk>& chunks = w.step_chunks;
  chunks.resize(w.L);
  if (!as_given)
    parallel_for(
        (int)w.L,
        [&](int l) {
          pack_rows(rows.data() + (size_t)l * w.H * stride, w.H, stride, stride, w.T_alloc, w.decode_elem(), pack,
                    chunks[l]);
        },
        pack && w.L * w.H * w.T_alloc * w.decode_elem() >= kParallelBytes);
  w.guarded("cannot write trace", [&] {
    const hsize_t n = (hsize_t)step + 1;
    w.row_len = std::max(w.row_len, len);
    h5::set_extent(w.decode, {n, w.L, w.H, w.row_len});
    for (hsize_t l = 0; l < w.L; ++l) {
      if (as_given)
        h5::write_chunk(w.decode, {n - 1, l, 0, 0}, float_bytes(rows.data() + l * w.H * w.T_alloc, w.H * w.T_alloc),
                        kSkipShuffleDeflate);
      else
        h5::write_chunk(w.decode, {n - 1, l, 0, 0}, chunks[l].bytes, chunks[l].skipped);
    }
    h5::set_extent(w.decode_lse, {n, w.L, w.H});
    h5::write_box(w.decode_lse, H5T_NATIVE_FLOAT, {n - 1, 0, 0}, {1, w.L, w.H}, lse.data());
    const int32_t qp = q_pos;
    h5::set_extent(w.query_pos, {n});
    h5::write_box(w.query_pos, H5T_NATIVE_INT32, {n - 1}, {1}, &qp);
    w.qpos.push_back(qp);
    h5::write_attr_int(w.file, "n_steps", (int64_t)n);  // a flushed partial file says how far it got
    w.flush();
    h5::stream_to_disk(w.file, kStreamBatch, w.written_to);
  });
}

int TraceWriter::decode_row_width() const { return (int)impl_->T_alloc; }

void TraceWriter::settle() {
  impl_->guarded("cannot write trace", [&] { h5::settle_writes(impl_->file); });
}

void TraceWriter::write_prefill(const PrefillEvidence& ev, std::span<const float> full_map) {
  Impl& w = *impl_;
  const size_t L = w.L, H = w.H, P = w.P, W = ev.window, Hkv = w.meta.shape.n_kv_heads;
  if (ev.shape.n_layers != (int)L || ev.shape.n_heads != (int)H || ev.prompt_len != (int)P || W < 1 || W > P ||
      ev.colsum.size() != L * H * P || ev.window_rows.size() != L * H * W * P || ev.window_lse.size() != L * H * W ||
      (!ev.key_scores.empty() && ev.key_scores.size() != L * Hkv * P) ||
      (ev.pool_block > 0 && (ev.n_pool != ((int)P + ev.pool_block - 1) / ev.pool_block ||
                             ev.pooled.size() != L * H * ev.n_pool * ev.n_pool)) ||
      (!full_map.empty() && full_map.size() != L * H * P * P))
    throw std::invalid_argument("TraceWriter: prefill evidence does not match the trace's shape");
  w.guarded("cannot write trace", [&] {
    for (const char* name : {ts::kPrefill, ts::kPrefillColsum, ts::kPrefillWindow, ts::kPrefillWindowLse,
                             ts::kPrefillKeyScores, ts::kPrefillPooled})
      h5::remove_link(w.file, name);
    h5::write_dataset(w.file, ts::kPrefillColsum, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {L, H, P}, ev.colsum.data());
    // Rows P-W..P-1 hold P-W+1..P keys: at least half full, as W <= P (see worth_packing).
    write_head_chunks(w.file, ts::kPrefillWindow, H5T_IEEE_F32LE, ev.window_rows.data(), L, H, W, P, 4, false);
    {
      h5::Handle ds = h5::open_dataset(w.file, ts::kPrefillWindow);
      h5::write_attr_int(ds, "window", (int64_t)W);
    }
    h5::write_dataset(w.file, ts::kPrefillWindowLse, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {L, H, W},
                      ev.window_lse.data());
    if (!ev.key_scores.empty())
      h5::write_dataset(w.file, ts::kPrefillKeyScores, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {L, Hkv, P},
                        ev.key_scores.data());
    if (ev.pool_block > 0) {
      const hsize_t nb = ev.n_pool;
      write_head_chunks(w.file, ts::kPrefillPooled, H5T_IEEE_F32LE, ev.pooled.data(), L, H, nb, nb, 4, true);
      h5::Handle ds = h5::open_dataset(w.file, ts::kPrefillPooled);
      h5::write_attr_int(ds, "block", (int64_t)ev.pool_block);
    }
    // The map is at most the capture budget; its packed copy stays a layer's worth.
    if (!full_map.empty()) write_head_chunks(w.file, ts::kPrefill, w.f16, full_map.data(), L, H, P, P, 2, true);
    w.flush();
  });
}

void TraceWriter::write_array(const std::string& path, const NamedArray& array,
                              const std::vector<std::pair<std::string, std::string>>& string_attrs) {
  ts::validate_array(path, array);
  impl_->guarded("cannot write trace", [&] { ts::write_array(impl_->file, path, array, string_attrs); });
}

void TraceWriter::write_run(const RunData& run) {
  Impl& w = *impl_;
  std::lock_guard<std::recursive_mutex> lock(h5::mutex());
  if (w.committed) throw std::logic_error("TraceWriter: already committed");
  for (RunData& r : w.runs)
    if (r.name == run.name) {
      r = run;
      return;
    }
  w.runs.push_back(run);
}

void TraceWriter::commit(const TraceMeta& meta, std::span<const int32_t> ids, const std::vector<std::string>& texts) {
  Impl& w = *impl_;
  const int n = (int)w.qpos.size();
  const hsize_t T = w.P + n;
  if (meta.shape.n_layers != w.meta.shape.n_layers || meta.shape.n_heads != w.meta.shape.n_heads ||
      meta.shape.n_kv_heads != w.meta.shape.n_kv_heads || meta.prompt_len != w.meta.prompt_len ||
      meta.decode_dtype != w.meta.decode_dtype)
    throw std::invalid_argument("TraceWriter::commit: meta differs from the one the recording started with");
  if (meta.n_steps != n)
    throw std::invalid_argument("TraceWriter::commit: meta.n_steps is " + std::to_string(meta.n_steps) + " but " +
                                std::to_string(n) + " steps were written");
  if (ids.size() != T || texts.size() != T)
    throw std::invalid_argument("TraceWriter::commit: need " + std::to_string(T) + " token ids and texts, got " +
                                std::to_string(ids.size()) + " and " + std::to_string(texts.size()));
  for (int32_t q : w.qpos)
    if ((hsize_t)q >= T) throw std::invalid_argument("TraceWriter::commit: a decode query lies past T");
  TraceMeta final_meta = meta;
  w.guarded("cannot write trace", [&] {
    for (const RunData& run : w.runs) ts::validate_run(run, final_meta, w.final_path);
    h5::set_extent(w.decode, {(hsize_t)n, w.L, w.H, T});
    h5::write_dataset(w.file, ts::kTokenIds, H5T_STD_I32LE, H5T_NATIVE_INT32, {T}, ids.data());
    h5::write_strings(w.file, ts::kTokenText, texts);
    for (const RunData& run : w.runs) ts::write_run(w.file, run, final_meta);
    final_meta.has_prefill_map = h5::is_dataset(w.file, ts::kPrefill);
    ts::write_meta(w.file, final_meta, true);
    w.f16.close("close");
    w.query_pos.close("close");
    w.decode_lse.close("close");
    w.decode.close("close");
    w.flush();
    h5::settle_writes(w.file);
    w.file.close("close");
    if (w.replaced) copy_mode_and_owner(*w.replaced, w.temp);
    publish_file(w.temp, w.target);
    w.temp.clear();
  });
  w.committed = true;
}

}  // namespace kvs
