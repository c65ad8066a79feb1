// h5::stream_to_disk: a file streamed out in rounds reads back intact, and the rounds before the
// last leave the page cache (where the filesystem has one to leave: not tmpfs).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <linux/magic.h>
#include <numeric>
#include <vector>

#include "analysis/h5_util.h"
#include "trace_test_util.h"

namespace kvs {
namespace {

using testing::TempDir;

// Fraction of the first `bytes` of the file at `path` held in the page cache.
double resident_fraction(const std::string& path, std::size_t bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  void* map = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  const std::size_t page = ::sysconf(_SC_PAGESIZE), pages = bytes / page;
  std::vector<unsigned char> in(pages);
  ::mincore(map, bytes, in.data());
  ::munmap(map, bytes);
  std::size_t held = 0;
  for (unsigned char c : in) held += c & 1;
  return double(held) / pages;
}

TEST(H5Stream, RoundsWriteTheFileOutAndDropItsEarlierPages) {
  TempDir dir;
  const std::string path = dir.file("s.h5");
  const hsize_t steps = 48, width = 256 * 1024;  // 48 steps of 1 MiB: rounds of 8 MiB
  {
    std::lock_guard<std::recursive_mutex> lock(h5::mutex());
    h5::init();
    h5::Handle fapl = h5::file_access();
    h5::Handle file = h5::file_handle(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl), "create");
    h5::Handle ds = h5::create_dataset(file, "/rows", H5T_IEEE_F32LE, {steps, width}, {{}, {1, width}, 0});
    std::vector<float> row(width);  // [width] step s: s * width + i
    off_t written_to = 0;
    for (hsize_t s = 0; s < steps; ++s) {
      std::iota(row.begin(), row.end(), float(s * width));
      h5::write_box(ds, H5T_NATIVE_FLOAT, {s, 0}, {1, width}, row.data());
      h5::check(H5Fflush(file, H5F_SCOPE_LOCAL), "flush");
      h5::stream_to_disk(file, off_t{8} << 20, written_to);
    }
    EXPECT_GE(written_to, off_t{40} << 20);  // the last round saw at least 40 of the 48 MiB
    ds.close("close rows");
    file.close("close file");
  }
  struct statfs fs;
  ASSERT_EQ(::statfs(dir.path.c_str(), &fs), 0);
  if (fs.f_type != TMPFS_MAGIC) {  // pages written out two rounds back were dropped
    EXPECT_LT(resident_fraction(path, std::size_t{24} << 20), 0.5);
  }

  std::lock_guard<std::recursive_mutex> lock(h5::mutex());
  h5::Handle file = h5::file_handle(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), "open");
  h5::Handle ds = h5::dataset_handle(H5Dopen2(file, "/rows", H5P_DEFAULT), "open rows");
  std::vector<float> all(steps * width);
  h5::read_all(ds, H5T_NATIVE_FLOAT, all.data());
  for (std::size_t i = 0; i < all.size(); i += 4099) ASSERT_EQ(all[i], float(i)) << i;
  EXPECT_EQ(all.back(), float(all.size() - 1));
}

}  // namespace
}  // namespace kvs
