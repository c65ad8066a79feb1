// The CUDA emulation's own check of overlapped launches (kernels/cuda_launch.cuh): kernels run in
// order here, so a kernel that reads the previous kernel's output before waiting for it would
// pass unnoticed; instead the emulation fails any overlapped launch in which a thread never
// waits, as an error of the launch's run (returned when the host waits for it, as on a GPU).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <vector>

#include "kernels/cuda_launch.cuh"
#include "kernels/cuda_ops.h"

namespace {

__global__ void copy_after_wait(float* dst, const float* src) {
  kvs::cuda::detail::wait_for_previous_kernels();
  kvs::cuda::detail::let_next_kernel_start();
  dst[threadIdx.x] = src[threadIdx.x];
}

__global__ void copy_without_wait(float* dst, const float* src) { dst[threadIdx.x] = src[threadIdx.x]; }

// Threads 0..31 wait, the rest return first.
__global__ void copy_half_waiting(float* dst, const float* src) {
  if (threadIdx.x >= 32) return;
  kvs::cuda::detail::wait_for_previous_kernels();
  dst[threadIdx.x] = src[threadIdx.x];
}

TEST(EmuOverlappedLaunch, KernelsThatWaitRun) {
  std::vector<float> src(64, 2.0f), dst(64, 0.0f);
  kvs::cuda::detail::launch_overlapped(copy_after_wait, 1, 64, nullptr, dst.data(), src.data());
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(dst, src);
}

TEST(EmuOverlappedLaunch, AThreadThatNeverWaitsFailsTheLaunch) {
  std::vector<float> src(64, 2.0f), dst(64, 0.0f);
  kvs::cuda::detail::launch_overlapped(copy_without_wait, 1, 64, nullptr, dst.data(), src.data());
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // queued, not run yet
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);
  kvs::cuda::detail::launch_overlapped(copy_half_waiting, 1, 64, nullptr, dst.data(), src.data());
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

TEST(EmuOverlappedLaunch, PlainLaunchesNeedNoWait) {
  std::vector<float> src(64, 2.0f), dst(64, 0.0f);
  kvs::cuda::set_launch_overlap(false);
  kvs::cuda::detail::launch_overlapped(copy_without_wait, 1, 64, nullptr, dst.data(), src.data());
  kvs::cuda::set_launch_overlap(true);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(dst, src);
}

}  // namespace
