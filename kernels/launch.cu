// Whether the decode kernels overlap the kernel before them (kernels/cuda_launch.cuh): a switch
// for measuring both ways (bench_cuda --overlap), and the device's support, asked once.
#include <atomic>

#include "kernels/cuda_launch.cuh"
#include "kernels/cuda_ops.h"

namespace kvs::cuda {
namespace {

std::atomic<bool> g_overlap_allowed{true};

// Programmatic dependent launch needs compute capability 9.0 (Hopper) or later.
bool device_supports_overlap() {
  int device = 0, major = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) {
    cudaGetLastError();  // not sticky: the launches fall back to plain ones
    return false;
  }
  return major >= 9;
}

}  // namespace

void set_launch_overlap(bool allowed) { g_overlap_allowed = allowed; }

namespace detail {

bool overlap_enabled() {
  static const bool supported = device_supports_overlap();
  return supported && g_overlap_allowed;
}

}  // namespace detail
}  // namespace kvs::cuda
