// The recording file driver (analysis/h5_direct_driver.h): what it writes reads back byte for
// byte through HDF5's default driver, reads see writes still batched, large raw ranges go around
// the page cache where the filesystem allows O_DIRECT, and a failed write comes back with the OS
// reason, after which the abandoned file still closes.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <random>
#include <vector>

#include "analysis/h5_direct_driver.h"
#include "analysis/h5_util.h"
#include "trace_test_util.h"

namespace kvs {
namespace {

using testing::TempDir;

constexpr hsize_t kRows = 24;
constexpr hsize_t kWide = 70001;  // bytes per chunk of "wide": an aligned middle long enough to go direct
constexpr hsize_t kNarrow = 37;   // bytes per chunk of "narrow": always through the cache

bool takes_o_direct(const std::string& dir) {
  const std::string probe = dir + "/o_direct_probe";
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_DIRECT, 0644);
  if (fd >= 0) ::close(fd);
  ::unlink(probe.c_str());
  return fd >= 0;
}

h5::Handle create_through_driver(const std::string& path) {
  h5::Handle fapl = h5::file_access();
  h5::use_direct_driver(fapl);
  return h5::file_handle(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl), "create");
}

h5::Handle chunked(hid_t file, const char* name, hsize_t width) {
  h5::Handle space = h5::space_handle(H5Screate_simple(2, std::vector<hsize_t>{kRows, width}.data(), nullptr), name);
  h5::Handle plist = h5::plist_handle(H5Pcreate(H5P_DATASET_CREATE), name);
  const hsize_t chunk[2] = {1, width};
  h5::check(H5Pset_chunk(plist, 2, chunk), name);
  return h5::dataset_handle(H5Dcreate2(file, name, H5T_NATIVE_UINT8, space, H5P_DEFAULT, plist, H5P_DEFAULT), name);
}

std::vector<uint8_t> random_bytes(std::mt19937& rng, size_t n) {
  std::vector<uint8_t> b(n);
  for (auto& x : b) x = (uint8_t)rng();
  return b;
}

// Writes "wide" and "narrow" row by row, interleaved, with a metadata change and a flush after
// some rows (the recorder's pattern); returns the rows written, wide then narrow.
std::vector<std::vector<uint8_t>> write_rows(hid_t file, std::mt19937& rng) {
  h5::Handle wide = chunked(file, "wide", kWide), narrow = chunked(file, "narrow", kNarrow);
  std::vector<std::vector<uint8_t>> rows;
  for (hsize_t r = 0; r < kRows; ++r) {
    rows.push_back(random_bytes(rng, kWide));
    rows.push_back(random_bytes(rng, kNarrow));
    const hsize_t at[2] = {r, 0};
    h5::check(H5Dwrite_chunk(wide, H5P_DEFAULT, 0, at, kWide, rows[rows.size() - 2].data()), "wide");
    h5::check(H5Dwrite_chunk(narrow, H5P_DEFAULT, 0, at, kNarrow, rows.back().data()), "narrow");
    h5::write_attr_int(file, "rows", (int64_t)r + 1);
    if (r % 3 == 0) h5::check(H5Fflush(file, H5F_SCOPE_LOCAL), "flush");
  }
  return rows;
}

// Reads both datasets of `path` through HDF5's default driver, rows in write_rows' order.
std::vector<std::vector<uint8_t>> read_rows(const std::string& path) {
  h5::Handle file = h5::file_handle(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), "open");
  EXPECT_EQ(h5::read_attr_int(file, "rows"), (int64_t)kRows);
  h5::Handle wide = h5::open_dataset(file, "wide"), narrow = h5::open_dataset(file, "narrow");
  std::vector<std::vector<uint8_t>> rows;
  for (hsize_t r = 0; r < kRows; ++r)
    for (auto [ds, width] : {std::pair<hid_t, hsize_t>{wide, kWide}, {narrow, kNarrow}}) {
      rows.emplace_back(width);
      h5::read_box(ds, H5T_NATIVE_UINT8, {r, 0}, {1, width}, rows.back().data());
    }
  return rows;
}

// Writes a file through the driver in `dir` and checks it reads back; returns the bytes the
// driver wrote directly meanwhile.
uint64_t round_trip(const std::string& dir) {
  const std::string path = dir + "/d.h5";
  std::mt19937 rng(11);
  const h5::DirectDriverTotals before = h5::direct_driver_totals();
  std::vector<std::vector<uint8_t>> written;
  {
    std::lock_guard<std::recursive_mutex> lock(h5::mutex());
    h5::init();
    h5::Handle file = create_through_driver(path);
    written = write_rows(file, rng);
    file.close("close");
  }
  const h5::DirectDriverTotals after = h5::direct_driver_totals();
  std::lock_guard<std::recursive_mutex> lock(h5::mutex());
  EXPECT_TRUE(read_rows(path) == written);
  EXPECT_GE(after.direct_bytes + after.cached_bytes - before.direct_bytes - before.cached_bytes,
            kRows * (kWide + kNarrow));
  return after.direct_bytes - before.direct_bytes;
}

TEST(H5DirectDriver, WritesReadBackThroughTheDefaultDriver) {
  TempDir dir;
  const uint64_t direct = round_trip(dir.path);
  if (takes_o_direct(dir.path))
    EXPECT_GE(direct, kRows * kWide / 2) << "the wide rows' aligned middles go around the page cache";
  else
    EXPECT_EQ(direct, 0u);
}

// A chunk read back through the same open file while its write may still be batched.
TEST(H5DirectDriver, ReadsSeeWritesNotYetInTheFile) {
  TempDir dir;
  std::mt19937 rng(3);
  std::lock_guard<std::recursive_mutex> lock(h5::mutex());
  h5::init();
  h5::Handle file = create_through_driver(dir.file("r.h5"));
  h5::Handle wide = chunked(file, "wide", kWide);
  for (hsize_t r = 0; r < 4; ++r) {
    const std::vector<uint8_t> row = random_bytes(rng, kWide);
    const hsize_t at[2] = {r, 0};
    h5::check(H5Dwrite_chunk(wide, H5P_DEFAULT, 0, at, kWide, row.data()), "write");
    h5::check(H5Fflush(file, H5F_SCOPE_LOCAL), "flush");
    std::vector<uint8_t> back(kWide);
    uint32_t filters = 0;
    h5::check(H5Dread_chunk(wide, H5P_DEFAULT, at, &filters, back.data()), "read");
    EXPECT_TRUE(back == row) << "row " << r;
  }
}

// A write past a file-size limit (a full disk's stand-in) is reported with the OS reason by
// settle_writes; the abandoned file, its descriptor diverted, then closes.
TEST(H5DirectDriver, AFailedWriteComesBackWithTheReason) {
  TempDir dir;
  std::mt19937 rng(5);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit old_limit;
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  std::lock_guard<std::recursive_mutex> lock(h5::mutex());
  h5::init();
  h5::Handle file = create_through_driver(dir.file("f.h5"));
  h5::Handle wide = chunked(file, "wide", kWide);
  h5::check(H5Fflush(file, H5F_SCOPE_LOCAL), "flush");
  h5::settle_writes(file);
  struct rlimit limit = old_limit;
  limit.rlim_cur = 64 * 1024;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &limit), 0);
  std::string reason;
  try {
    for (hsize_t r = 0; r < 4; ++r) {
      const std::vector<uint8_t> row = random_bytes(rng, kWide);
      const hsize_t at[2] = {r, 0};
      h5::check(H5Dwrite_chunk(wide, H5P_DEFAULT, 0, at, kWide, row.data()), "write");
      h5::check(H5Fflush(file, H5F_SCOPE_LOCAL), "flush");
    }
    h5::settle_writes(file);
  } catch (const h5::Error& e) {
    reason = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &old_limit);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_EQ(reason, "File too large");
  h5::divert_writes(file);
  wide.reset();
  EXPECT_NO_THROW(file.close("close"));
}

}  // namespace
}  // namespace kvs
