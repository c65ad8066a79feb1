// The CUDA emulation's thread and block orders (Schedule in emu.cpp): a kernel that reads what
// another thread or block wrote without a barrier between them must give a wrong result under
// some of the orders the emulation takes, since a GPU may take them too; a kernel with its
// barriers gives the right result under every one.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <vector>

#include "kernels/cuda_reduce.cuh"

namespace {

constexpr int kThreads = 128;

// out[t] = the value thread t+1 wrote (the last thread reads thread 0's), with or without the
// barrier between the write and the read.
template <bool kBarrier>
__global__ void rotate(float* out, const float* in) {
  __shared__ float s[kThreads];
  s[threadIdx.x] = in[threadIdx.x];
  if (kBarrier) __syncthreads();
  out[threadIdx.x] = s[(threadIdx.x + 1) % kThreads];
}

// kvs::cuda::detail::block_sum without the barrier that opens it: warp 0 may then write its part
// of this sum into red[0] while other warps still read the previous sum from it.
__device__ float sum_without_opening_barrier(float v, float* red) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = kvs::cuda::detail::warp_sum(v);
  if (lane == 0) red[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float t = lane < kThreads / 32 ? red[lane] : 0.0f;
    t = kvs::cuda::detail::warp_sum(t);
    if (lane == 0) red[0] = t;
  }
  __syncthreads();
  return red[0];
}

// Two block sums in a row over the same shared scratch, the second of twice the values.
template <bool kOpeningBarrier>
__global__ void two_sums(float* out, const float* in) {
  __shared__ float red[32];
  auto sum = [&](float v) {
    return kOpeningBarrier ? kvs::cuda::detail::block_sum(v, red) : sum_without_opening_barrier(v, red);
  };
  const float a = sum(in[threadIdx.x]);
  const float b = sum(2.0f * in[threadIdx.x]);
  out[threadIdx.x] = b - 2.0f * a;
}

// Block b adds block b-1's input to its own, written by block b-1 in the same launch: a race
// between blocks, whichever order they run in.
__global__ void read_previous_block(float* x) {
  if (blockIdx.x > 0 && threadIdx.x == 0) x[blockIdx.x] += x[blockIdx.x - 1];
}

// Runs kernel(out, in) in `launches` launches of one block, each on new values (shared memory
// keeps the previous block's, as a function static here, which must not pass for this block's);
// returns whether every output matched want(in).
template <class Kernel, class Want>
bool all_right(Kernel kernel, int launches, Want want) {
  bool right = true;
  for (int i = 0; i < launches; ++i) {
    std::vector<float> in(kThreads), out(kThreads, -1.0f);
    for (int t = 0; t < kThreads; ++t) in[t] = static_cast<float>(1000 * i + t);  // exact sums
    cuda_emu::launcher(kernel, 1, kThreads)(out.data(), in.data());
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    right = right && out == want(in);
  }
  return right;
}

TEST(EmuSchedule, AMissingBarrierBetweenThreadsGivesAWrongResult) {
  auto rotated = [](const std::vector<float>& in) {
    std::vector<float> want(kThreads);
    for (int t = 0; t < kThreads; ++t) want[t] = in[(t + 1) % kThreads];
    return want;
  };
  EXPECT_TRUE(all_right(rotate<true>, 4, rotated));
  EXPECT_FALSE(all_right(rotate<false>, 4, rotated));
}

// Only the warp-by-warp orders let warp 0 get a whole reduction ahead of the others.
TEST(EmuSchedule, AWarpGettingAheadByAWholeReductionIsSeen) {
  auto zeros = [](const std::vector<float>&) { return std::vector<float>(kThreads, 0.0f); };
  EXPECT_TRUE(all_right(two_sums<true>, 4, zeros));
  EXPECT_FALSE(all_right(two_sums<false>, 4, zeros));
}

TEST(EmuSchedule, BlocksReadingEachOthersOutputGiveDifferentResultsAcrossLaunches) {
  std::vector<std::vector<float>> results;
  for (int i = 0; i < 2; ++i) {
    std::vector<float> x = {1, 1, 1, 1};
    cuda_emu::launcher(read_previous_block, 4, 32)(x.data());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    results.push_back(x);
  }
  EXPECT_NE(results[0], results[1]);  // one ran its blocks first to last, the other last to first
}

}  // namespace
