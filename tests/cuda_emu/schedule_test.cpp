// The CUDA emulation's thread and block orders (Schedule in emu.cpp): a kernel that reads what
// another thread or block wrote without a barrier between them must give a wrong result under
// some of the orders the emulation takes, since a GPU may take them too; a kernel with its
// barriers gives the right result under every one. Likewise shared memory a block reads before
// writing holds NaN, not the previous block's values.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
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

// Block b writes shared entries 0..n_written-1 (n_written = 32 for block 0, 16 after) and reads
// all 32: the entries it did not write hold nothing of its own on a GPU. The shared array is
// declared as translate.py writes declarations for the emulation.
__global__ void read_unwritten_shared(float* out) {
  __shared__ float s[32];
  cuda_emu::fresh_shared(s, sizeof s);
  const int n_written = blockIdx.x == 0 ? 32 : 16;
  if (static_cast<int>(threadIdx.x) < n_written) s[threadIdx.x] = 1.0f;
  __syncthreads();
  out[blockIdx.x * 32 + threadIdx.x] = s[threadIdx.x];
}

// Lanes 16..31 return, then lanes 0..15 sum over the warp: the shuffles name lanes that are gone.
__global__ void shuffle_after_return(float* out) {
  if (threadIdx.x >= 16) return;
  out[threadIdx.x] = kvs::cuda::detail::warp_sum(1.0f);
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

// A block reading shared memory it never wrote gets NaN, not the previous block's values (the
// blocks of one launch run in either direction, so read them both ways).
TEST(EmuSchedule, SharedMemoryABlockDidNotWriteHoldsNaN) {
  for (int launch = 0; launch < 2; ++launch) {
    std::vector<float> out(2 * 32, 0.0f);
    cuda_emu::launcher(read_unwritten_shared, 2, 32)(out.data());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    for (int t = 0; t < 32; ++t) EXPECT_EQ(out[t], 1.0f) << t;
    for (int t = 0; t < 16; ++t) EXPECT_EQ(out[32 + t], 1.0f) << t;
    for (int t = 16; t < 32; ++t) EXPECT_TRUE(std::isnan(out[32 + t])) << t;
  }
}

TEST(EmuSchedule, AShuffleAfterLanesReturnedIsAnError) {
  std::vector<float> out(32, 0.0f);
  cuda_emu::launcher(shuffle_after_return, 1, 32)(out.data());
  EXPECT_THROW(cudaDeviceSynchronize(), std::runtime_error);
}

}  // namespace
