// cuBLAS is opened on first use (inference/cuda_blas.h): every entry point the backend calls
// resolves, with or without a GPU (opening the library needs none), and the program does not
// map libcublas before that.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "inference/cuda_blas.h"

namespace kvs::cuda {
namespace {

bool libcublas_mapped() {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);)
    if (line.find("libcublas") != std::string::npos) return true;
  return false;
}

TEST(CudaBlas, NotMappedUntilFirstUseThenEveryEntryPointResolves) {
  EXPECT_FALSE(libcublas_mapped()) << "libcublas was loaded at start";
  const BlasApi& api = blas();
  EXPECT_NE(api.create, nullptr);
  EXPECT_NE(api.destroy, nullptr);
  EXPECT_NE(api.set_stream, nullptr);
  EXPECT_NE(api.gemm_ex, nullptr);
  EXPECT_NE(api.gemm_strided_batched_ex, nullptr);
  ASSERT_NE(api.status_string, nullptr);
  EXPECT_STRNE(api.status_string(CUBLAS_STATUS_SUCCESS), "");
  EXPECT_EQ(&blas(), &api) << "loaded once";
}

}  // namespace
}  // namespace kvs::cuda
