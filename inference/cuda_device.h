// The CUDA runtime as the backend uses it: error checks that throw one-line messages, device
// buffers that free themselves, pinned host buffers for asynchronous copies, and the
// out-of-memory error that names the bytes asked and free.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>

#include "inference/errors.h"

namespace kvs::cuda {

// The GPU lacked memory: "CUDA: out of GPU memory: asked N bytes for WHAT, M of T bytes free".
// An InputError: the model or context asked for is too big for this GPU (the CLI exits with 2).
class OutOfMemory : public InputError {
 public:
  using InputError::InputError;
};

// Throws std::runtime_error("CUDA: <what>: <error string>") when err is not cudaSuccess.
void check(cudaError_t err, const char* what);
// After kernel launches: throws if the last launch failed.
void check_launch(const char* what);

// Device memory for n elements of T (uninitialised). Throws OutOfMemory naming `what`.
void* device_alloc(std::size_t bytes, const char* what);
void* pinned_alloc(std::size_t bytes, const char* what);

template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(std::size_t n, const char* what)
      : p_(static_cast<T*>(device_alloc(n * sizeof(T), what))), n_(n) {}
  ~DeviceBuffer() { if (p_) cudaFree(p_); }
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    return *this;
  }
  T* get() const { return p_; }
  std::size_t size() const { return n_; }
  std::size_t bytes() const { return n_ * sizeof(T); }

 private:
  T* p_ = nullptr;
  std::size_t n_ = 0;
};

// Page-locked host memory, so that cudaMemcpyAsync really overlaps.
template <class T>
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(std::size_t n, const char* what)
      : p_(static_cast<T*>(pinned_alloc(n * sizeof(T), what))), n_(n) {}
  ~PinnedBuffer() { if (p_) cudaFreeHost(p_); }
  PinnedBuffer(PinnedBuffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  PinnedBuffer& operator=(PinnedBuffer&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    return *this;
  }
  T* get() const { return p_; }
  std::size_t size() const { return n_; }

 private:
  T* p_ = nullptr;
  std::size_t n_ = 0;
};

// Whether a usable GPU is present; on false, *why says why ("no CUDA device", the driver error).
bool gpu_present(std::string* why = nullptr);

}  // namespace kvs::cuda
