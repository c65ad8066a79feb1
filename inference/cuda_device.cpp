// CUDA runtime helpers: one-line errors, allocation with the out-of-memory message, GPU presence.
#include "inference/cuda_device.h"

namespace kvs::cuda {

void check(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return;
  throw std::runtime_error(std::string("CUDA: ") + what + ": " + cudaGetErrorString(err));
}

void check_launch(const char* what) { check(cudaGetLastError(), what); }

void* device_alloc(std::size_t bytes, const char* what) {
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, bytes == 0 ? 1 : bytes);
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // clear the sticky-free error state of this call
    std::size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    throw OutOfMemory("CUDA: out of GPU memory: asked " + std::to_string(bytes) + " bytes for " +
                      what + ", " + std::to_string(free_b) + " of " + std::to_string(total_b) +
                      " bytes free");
  }
  check(err, what);
  return p;
}

void* pinned_alloc(std::size_t bytes, const char* what) {
  void* p = nullptr;
  check(cudaMallocHost(&p, bytes == 0 ? 1 : bytes), what);
  return p;
}

bool gpu_present(std::string* why) {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    cudaGetLastError();
    // Without an NVIDIA driver the runtime reports "CUDA driver version is insufficient for CUDA
    // runtime version", which reads as an old driver rather than none.
    const bool no_driver = err == cudaErrorInsufficientDriver || err == cudaErrorNoDevice;
    if (why) *why = no_driver ? std::string("no NVIDIA GPU driver or device (") + cudaGetErrorString(err) + ")"
                              : cudaGetErrorString(err);
    return false;
  }
  if (n == 0) {
    if (why) *why = "no CUDA device";
    return false;
  }
  return true;
}

}  // namespace kvs::cuda
