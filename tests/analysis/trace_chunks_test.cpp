// The trace writer packs its bulk chunks itself (analysis/chunk_codec.h) and the reader unpacks
// them itself: HDF5's own shuffle + deflate filters read what we pack, our unpacking agrees with
// HDF5 on traces it did not write in that layout, and a corrupt chunk is a one-line error.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <random>

#include "analysis/chunk_codec.h"
#include "analysis/float16.h"
#include "analysis/h5_util.h"
#include "analysis/trace.h"
#include "analysis/trace_schema.h"
#include "inference/errors.h"
#include "kernels/quant.h"
#include "trace_test_util.h"

namespace kvs {
namespace {

using testing::TempDir;

template <class T>
std::span<const uint8_t> bytes_of(const std::vector<T>& v) {
  return {reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(T)};
}

std::vector<float> random_floats(std::mt19937& rng, size_t n) {
  std::exponential_distribution<float> ex(1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = ex(rng) * ex(rng) * 1e-3f;
  return v;
}

// Chunks packed here, written raw, read through HDF5's filter pipeline: the values come back.
TEST(ChunkCodec, Hdf5ReadsPackedChunksThroughItsOwnFilters) {
  TempDir dir;
  std::mt19937 rng(3);
  const hsize_t S = 2, H = 3, W = 50;  // dataset [S, 1, H, W], one chunk per s
  std::lock_guard<std::recursive_mutex> lock(h5::mutex());
  h5::init();
  h5::Handle fapl = h5::file_access();
  h5::Handle file = h5::file_handle(H5Fcreate(dir.file("c.h5").c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl), "create");
  h5::Handle f16 = h5::float16_type();
  for (const size_t elem : {2, 4}) {
    const std::string name = "/d" + std::to_string(elem);
    h5::Handle ds = h5::create_dataset(file, name, elem == 2 ? f16.get() : H5T_IEEE_F32LE, {S, 1, H, W},
                                       {{}, {1, 1, H, W}, 1});
    std::vector<float> want(S * H * W);  // [S, H, W] what HDF5 should read back
    for (hsize_t s = 0; s < S; ++s) {
      std::vector<float> chunk = random_floats(rng, H * W);  // [H, W]
      std::vector<uint8_t> stored;
      if (elem == 2) {
        std::vector<uint16_t> halves(chunk.size());
        floats_to_halves(chunk, halves.data());
        for (size_t i = 0; i < chunk.size(); ++i) chunk[i] = fp16_to_fp32(halves[i]);
        stored = pack_shuffle_deflate(bytes_of(halves), 2, 1);
      } else {
        stored = pack_shuffle_deflate(bytes_of(chunk), 4, 1);
      }
      h5::write_chunk(ds, {s, 0, 0, 0}, stored);
      std::copy(chunk.begin(), chunk.end(), want.begin() + s * H * W);
    }
    std::vector<float> got(S * H * W);
    h5::read_all(ds, H5T_NATIVE_FLOAT, got.data());
    EXPECT_EQ(got, want) << name;
    EXPECT_EQ(h5::shuffle_deflate_chunk(ds, elem == 2 ? f16.get() : H5T_IEEE_F32LE),
              (std::vector<hsize_t>{1, 1, H, W}));
    EXPECT_TRUE(h5::shuffle_deflate_chunk(ds, elem == 2 ? H5T_IEEE_F32LE : f16.get()).empty()) << "other type";
  }
  h5::Handle plain = h5::create_dataset(file, "/plain", H5T_IEEE_F32LE, {4, 4}, {{}, {2, 2}, 0});
  EXPECT_TRUE(h5::shuffle_deflate_chunk(plain, H5T_IEEE_F32LE).empty()) << "no filters";
}

// A chunk no file of this size could hold (an unlimited axis lets any chunk length through the
// extent check): refused before HDF5 allocates it to read.
TEST(ChunkCodec, ChunksLargerThanTheFileCouldHoldAreRefused) {
  TempDir dir;
  std::lock_guard<std::recursive_mutex> lock(h5::mutex());
  h5::init();
  h5::Handle fapl = h5::file_access();
  const std::string path = dir.file("c.h5");
  {
    h5::Handle file = h5::file_handle(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl), "create");
    h5::create_dataset(file, "/huge", H5T_IEEE_F32LE, {1, 10}, {{H5S_UNLIMITED, H5S_UNLIMITED}, {1, 1u << 28}, 1});
    h5::create_dataset(file, "/fine", H5T_IEEE_F32LE, {1, 10}, {{H5S_UNLIMITED, H5S_UNLIMITED}, {1, 4096}, 1});
  }
  h5::Handle file = h5::file_handle(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl), "open");
  try {
    h5::check_chunks(h5::open_dataset(file, "/huge"));
    ADD_FAILURE() << "a 1 GiB chunk passed in a file of a few KiB";
  } catch (const h5::Error& e) {
    EXPECT_NE(std::string(e.what()).find("chunks of 1073741824 bytes cannot come from a file of"), std::string::npos)
        << e.what();
  }
  EXPECT_NO_THROW(h5::check_chunks(h5::open_dataset(file, "/fine")));
}

TEST(ChunkCodec, UnpackInvertsPackAndRefusesOtherBytes) {
  std::mt19937 rng(4);
  const std::vector<float> values = random_floats(rng, 999);
  const std::span<const uint8_t> raw = bytes_of(values);
  for (const size_t elem : {1, 2, 4}) {
    const std::vector<uint8_t> stored = pack_shuffle_deflate(raw.first(raw.size() / elem * elem), elem, 1);
    std::vector<uint8_t> back(raw.size() / elem * elem);
    ASSERT_TRUE(unpack_shuffle_deflate(stored, elem, back));
    EXPECT_TRUE(std::equal(back.begin(), back.end(), raw.begin())) << "elem " << elem;
    std::vector<uint8_t> longer(back.size() + elem);
    EXPECT_FALSE(unpack_shuffle_deflate(stored, elem, longer)) << "a chunk of another size";
    EXPECT_FALSE(unpack_shuffle_deflate(std::span(stored).first(stored.size() / 2), elem, back)) << "truncated";
    std::vector<uint8_t> flipped = stored;
    flipped[flipped.size() / 2] ^= 0x5a;
    EXPECT_FALSE(unpack_shuffle_deflate(flipped, elem, back)) << "corrupt (adler-32)";
  }
  std::vector<uint8_t> out(8);
  EXPECT_THROW(pack_shuffle_deflate(raw.first(7), 2, 1), std::invalid_argument);
  EXPECT_THROW(pack_shuffle_deflate(raw.first(8), 2, 0), std::invalid_argument);
}

// Random bytes with zero runs of the lengths around every boundary of the packer (kept or
// collapsed at 32, a match's 3 and 258 bytes, a stored block's 65,535), between non-zero stretches.
std::vector<uint8_t> bytes_with_zero_runs(std::mt19937& rng, size_t& collapsible) {
  std::uniform_int_distribution<int> nonzero(1, 255);
  std::vector<uint8_t> v;
  collapsible = 0;
  const size_t runs[] = {1, 2, 3, 15, 16, 31, 32, 33, 34, 35, 258, 259, 260, 261, 262, 517, 70000, 5};
  const size_t stretches[] = {1, 7, 8, 9, 70000};
  for (size_t i = 0; i < std::size(runs); ++i) {
    v.insert(v.end(), runs[i], 0);
    if (runs[i] >= 32) collapsible += runs[i];
    for (size_t k = 0; k < stretches[i % std::size(stretches)]; ++k) v.push_back(nonzero(rng));
  }
  return v;
}

// pack_shuffle_zero_runs writes a zlib stream that libdeflate (the reader's fast path) and
// HDF5's own filter pipeline (zlib) inflate to the chunk, collapsing only long zero runs.
TEST(ChunkCodec, ZeroRunPackingIsAStreamEveryInflaterReads) {
  std::mt19937 rng(5);
  size_t collapsible = 0;
  const std::vector<uint8_t> runs = bytes_with_zero_runs(rng, collapsible);
  std::uniform_int_distribution<int> nonzero(1, 255);
  std::vector<uint8_t> dense(1000);
  for (uint8_t& b : dense) b = nonzero(rng);
  const std::vector<uint8_t> zeros(200000, 0);
  struct Case {
    const char* name;
    std::span<const uint8_t> raw;
    size_t at_most;  // stored bytes
  };
  const Case cases[] = {
      {"zero runs", runs, runs.size() - collapsible + collapsible / 100 + 4096},
      {"no zeros", dense, dense.size() + 5 + 11},
      {"all zeros", zeros, 200000 / 100},
      {"empty", {}, 16},
  };
  for (const Case& c : cases) {
    for (const size_t elem : {1, 4}) {
      if (c.raw.size() % elem != 0) continue;
      const std::vector<uint8_t> stored = pack_shuffle_zero_runs(c.raw, elem);
      EXPECT_LE(stored.size(), c.at_most) << c.name << ", elem " << elem;
      std::vector<uint8_t> back(c.raw.size());
      ASSERT_TRUE(unpack_shuffle_deflate(stored, elem, back)) << c.name << ", elem " << elem;
      EXPECT_TRUE(std::equal(back.begin(), back.end(), c.raw.begin())) << c.name << ", elem " << elem;
    }
  }
  EXPECT_THROW(pack_shuffle_zero_runs(std::span(runs).first(7), 4), std::invalid_argument);

  // Decode rows as the writer packs them: [H, W] floats, values then zeros, read back by HDF5.
  TempDir dir;
  const hsize_t H = 9, W = 1000;
  std::lock_guard<std::recursive_mutex> lock(h5::mutex());
  h5::init();
  h5::Handle fapl = h5::file_access();
  h5::Handle file = h5::file_handle(H5Fcreate(dir.file("z.h5").c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl), "create");
  h5::Handle ds = h5::create_dataset(file, "/rows", H5T_IEEE_F32LE, {3, H, W}, {{}, {1, H, W}, 1});
  std::vector<float> want(3 * H * W, 0.0f);  // [3, H, W]
  for (hsize_t s = 0; s < 3; ++s) {
    const size_t len = (s + 1) * 150;
    for (hsize_t h = 0; h < H; ++h) {
      const std::vector<float> row = random_floats(rng, len);
      std::copy(row.begin(), row.end(), want.begin() + (s * H + h) * W);
    }
    const std::vector<float> chunk(want.begin() + s * H * W, want.begin() + (s + 1) * H * W);
    const std::vector<uint8_t> stored = pack_shuffle_zero_runs(bytes_of(chunk), 4);
    EXPECT_LT(stored.size(), H * len * 4 + 4096) << "step " << s << ": the zero tails collapsed";
    h5::write_chunk(ds, {s, 0, 0}, stored);
  }
  std::vector<float> got(3 * H * W);
  h5::read_all(ds, H5T_NATIVE_FLOAT, got.data());
  EXPECT_EQ(got, want);
}

// A small float16 trace: 3 layers x 2 heads, prompt 7, 4 steps.
TraceMeta write_trace(const std::string& path, std::mt19937& rng) {
  TraceMeta m = testing::small_meta(3, 2, 1, 7);
  m.decode_dtype = "float16";
  const int steps = 4;
  TraceWriter w(path, m, steps);
  for (int s = 0; s < steps; ++s) testing::write_random_step(w, rng, m, s);
  m.n_steps = steps;
  w.commit(m, testing::token_ids(m.total_len()), testing::token_texts(m.total_len()));
  return m;
}

std::vector<std::vector<float>> read_steps(const std::string& path) {
  TraceReader r(path);
  std::vector<std::vector<float>> steps(r.meta().n_steps);
  std::vector<float> lse;
  for (int s = 0; s < r.meta().n_steps; ++s) r.read_decode_step(s, steps[s], lse);
  return steps;
}

// Rewrites /attention/decode with HDF5 packing [1, L, H, T] chunks itself (the layout of other
// writers, and of this one before): the reader then lets HDF5 read, and gets the same rows.
TEST(TraceChunks, OtherChunkLayoutsReadTheSame) {
  TempDir dir;
  std::mt19937 rng(5);
  const std::string path = dir.file("t.h5");
  const TraceMeta m = write_trace(path, rng);
  const auto packed = read_steps(path);
  {
    std::lock_guard<std::recursive_mutex> lock(h5::mutex());
    h5::init();
    h5::Handle fapl = h5::file_access();
    h5::Handle file = h5::file_handle(H5Fopen(path.c_str(), H5F_ACC_RDWR, fapl), "open");
    const hsize_t n = m.n_steps, L = m.shape.n_layers, H = m.shape.n_heads, T = m.total_len();
    std::vector<float> all(n * L * H * T);
    {
      h5::Handle ds = h5::open_dataset(file, trace_schema::kDecode);
      h5::read_all(ds, H5T_NATIVE_FLOAT, all.data());
    }
    h5::remove_link(file, trace_schema::kDecode);
    h5::Handle f16 = h5::float16_type();
    h5::Handle ds = h5::create_dataset(file, trace_schema::kDecode, f16, {n, L, H, T}, {{}, {1, L, H, T}, 4});
    h5::write_box(ds, H5T_NATIVE_FLOAT, {0, 0, 0, 0}, {n, L, H, T}, all.data());
    EXPECT_TRUE(h5::shuffle_deflate_chunk(ds, f16).size() == 4);
  }
  EXPECT_EQ(read_steps(path), packed);
}

// float32 decode chunks at least half full of values are stored unpacked (filter mask: both
// filters skipped), the mostly-zero chunks of early steps packed; the reader's rows, HDF5's own
// reading through its filter pipeline and the rows written agree exactly, step by step.
TEST(TraceChunks, Float32ChunksMostlyFullAreStoredUnpacked) {
  TempDir dir;
  std::mt19937 rng(8);
  const std::string path = dir.file("t.h5");
  TraceMeta m = testing::small_meta(3, 2, 1, 3);  // rows of 4..11 keys in chunks 11 wide
  const int steps = 8;
  std::vector<std::vector<float>> written(steps);  // [steps][L, H, q + 1]
  {
    TraceWriter w(path, m, steps);
    for (int s = 0; s < steps; ++s) written[s] = testing::write_random_step(w, rng, m, s);
    m.n_steps = steps;
    w.commit(m, testing::token_ids(m.total_len()), testing::token_texts(m.total_len()));
  }
  const hsize_t L = m.shape.n_layers, H = m.shape.n_heads, T = m.total_len();
  std::vector<float> hdf5(steps * L * H * T);  // [steps, L, H, T] through HDF5's pipeline
  {
    std::lock_guard<std::recursive_mutex> lock(h5::mutex());
    h5::init();
    h5::Handle fapl = h5::file_access();
    h5::Handle file = h5::file_handle(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl), "open");
    h5::Handle ds = h5::open_dataset(file, trace_schema::kDecode);
    for (hsize_t s = 0; s < (hsize_t)steps; ++s) {
      const hsize_t len = m.prompt_len + s + 1;
      std::vector<uint8_t> stored;
      uint32_t skipped = 0;
      ASSERT_TRUE(h5::read_chunk(ds, {s, 1, 0, 0}, 1u << 20, stored, skipped));
      EXPECT_EQ(skipped, 2 * len < T ? 0u : kSkipShuffleDeflate) << "step " << s;
      if (skipped) {
        EXPECT_EQ(stored.size(), H * T * sizeof(float)) << "step " << s;
      }
    }
    h5::read_all(ds, H5T_NATIVE_FLOAT, hdf5.data());
  }
  const auto read = read_steps(path);
  for (int s = 0; s < steps; ++s) {
    const hsize_t len = m.prompt_len + s + 1;
    std::vector<float> want(L * H * T, 0.0f);  // [L, H, T] written rows, zeros past len
    for (hsize_t r = 0; r < L * H; ++r)
      std::copy_n(written[s].begin() + r * len, len, want.begin() + r * T);
    EXPECT_EQ(read[s], want) << "reader, step " << s;
    EXPECT_TRUE(std::equal(want.begin(), want.end(), hdf5.begin() + s * L * H * T)) << "HDF5, step " << s;
  }
}

// The prefill window rows (always at least half full) are stored unpacked, the pooled map (half
// zeros) packed; the reader and HDF5's own pipeline give back exactly what was written.
TEST(TraceChunks, PrefillWindowRowsAreStoredUnpackedThePooledMapPacked) {
  TempDir dir;
  std::mt19937 rng(9);
  const std::string path = dir.file("t.h5");
  TraceMeta m = testing::small_meta(2, 3, 1, 12);
  const size_t L = 2, H = 3, P = 12, W = 4, block = 3, nb = P / block;
  PrefillEvidence ev;
  ev.shape = m.shape;
  ev.prompt_len = (int)P;
  ev.window = (int)W;
  ev.colsum = random_floats(rng, L * H * P);
  ev.window_rows.assign(L * H * W * P, 0.0f);  // [L, H, W, P] causal rows of queries P-W..P-1
  for (size_t lh = 0; lh < L * H; ++lh)
    for (size_t w = 0; w < W; ++w) {
      const std::vector<float> row = testing::softmax(rng, (int)(P - W + w + 1));
      std::copy(row.begin(), row.end(), ev.window_rows.begin() + (lh * W + w) * P);
    }
  ev.window_lse = random_floats(rng, L * H * W);
  ev.pool_block = (int)block;
  ev.n_pool = (int)nb;
  ev.pooled.assign(L * H * nb * nb, 0.0f);  // [L, H, nb, nb] causal: cells above the diagonal zero
  for (size_t lh = 0; lh < L * H; ++lh)
    for (size_t i = 0; i < nb; ++i)
      for (size_t j = 0; j <= i; ++j) ev.pooled[(lh * nb + i) * nb + j] = random_floats(rng, 1)[0];
  {
    TraceWriter w(path, m, 0);
    w.write_prefill(ev, {});
    m.n_steps = 0;
    w.commit(m, testing::token_ids(P), testing::token_texts(P));
  }
  std::vector<float> window(L * H * W * P), pooled(L * H * nb * nb);  // through HDF5's pipeline
  {
    std::lock_guard<std::recursive_mutex> lock(h5::mutex());
    h5::init();
    h5::Handle fapl = h5::file_access();
    h5::Handle file = h5::file_handle(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl), "open");
    h5::Handle win = h5::open_dataset(file, trace_schema::kPrefillWindow);
    h5::Handle pool = h5::open_dataset(file, trace_schema::kPrefillPooled);
    for (hsize_t l = 0; l < L; ++l)
      for (hsize_t h = 0; h < H; ++h) {
        std::vector<uint8_t> stored;
        uint32_t skipped = 0;
        ASSERT_TRUE(h5::read_chunk(win, {l, h, 0, 0}, 1u << 20, stored, skipped));
        EXPECT_EQ(skipped, kSkipShuffleDeflate);
        EXPECT_EQ(stored.size(), W * P * sizeof(float));
        ASSERT_TRUE(h5::read_chunk(pool, {l, h, 0, 0}, 1u << 20, stored, skipped));
        EXPECT_EQ(skipped, 0u);
      }
    h5::read_all(win, H5T_NATIVE_FLOAT, window.data());
    h5::read_all(pool, H5T_NATIVE_FLOAT, pooled.data());
  }
  EXPECT_EQ(window, ev.window_rows);
  EXPECT_EQ(pooled, ev.pooled);
  const TraceReader r(path);
  const PrefillEvidence back = r.read_prefill();
  EXPECT_EQ(back.window_rows, ev.window_rows);
  EXPECT_EQ(back.window_lse, ev.window_lse);
  EXPECT_EQ(back.colsum, ev.colsum);
  const PooledMap map = r.read_prefill_pooled(1, 2);
  EXPECT_EQ(map.block, (int)block);
  EXPECT_TRUE(std::equal(map.cells.begin(), map.cells.end(), ev.pooled.begin() + (1 * H + 2) * nb * nb));
}

// A flipped byte inside a packed decode chunk: a one-line InputError naming the file, whichever
// of opening (the probe) or reading finds it.
TEST(TraceChunks, CorruptDecodeChunkIsAnInputError) {
  TempDir dir;
  std::mt19937 rng(6);
  const std::string path = dir.file("t.h5");
  write_trace(path, rng);
  haddr_t addr = 0;
  hsize_t size = 0;
  {
    std::lock_guard<std::recursive_mutex> lock(h5::mutex());
    h5::init();
    h5::Handle fapl = h5::file_access();
    h5::Handle file = h5::file_handle(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl), "open");
    h5::Handle ds = h5::open_dataset(file, trace_schema::kDecode);
    const hsize_t offset[4] = {2, 1, 0, 0};
    unsigned mask = 0;
    ASSERT_GE(H5Dget_chunk_info_by_coord(ds, offset, &mask, &addr, &size), 0);
    ASSERT_GT(size, 8u);
  }
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp((std::streamoff)(addr + size / 2));
    char c = 0;
    f.seekg((std::streamoff)(addr + size / 2));
    f.get(c);
    f.seekp((std::streamoff)(addr + size / 2));
    f.put((char)(c ^ 0x5a));
  }
  try {
    const auto steps = read_steps(path);
    FAIL() << "read " << steps.size() << " steps of a corrupt trace";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(path), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace kvs
