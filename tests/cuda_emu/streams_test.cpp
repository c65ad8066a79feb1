// The CUDA emulation's streams (StreamQueue in emu.cpp): queued work runs only when the host has
// to wait for it, so that code which reads or reuses a buffer before waiting for the stream that
// uses it gets wrong bytes in a test, as it may on a GPU. These tests pin down the orderings the
// CUDA rules do promise (and the emulation keeps) and the ones they do not (which it breaks).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <vector>

namespace {

__global__ void add_one(float* x) { x[threadIdx.x] += 1.0f; }

struct Stream {
  cudaStream_t s = nullptr;
  explicit Stream(unsigned flags = cudaStreamNonBlocking) { EXPECT_EQ(cudaStreamCreateWithFlags(&s, flags), cudaSuccess); }
  ~Stream() { cudaStreamDestroy(s); }
};

struct Event {
  cudaEvent_t e = nullptr;
  Event() { EXPECT_EQ(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), cudaSuccess); }
  ~Event() { cudaEventDestroy(e); }
};

// n floats of pinned memory.
struct Pinned {
  float* p = nullptr;
  explicit Pinned(int n) { EXPECT_EQ(cudaMallocHost(reinterpret_cast<void**>(&p), n * sizeof(float)), cudaSuccess); }
  ~Pinned() { cudaFreeHost(p); }
};

struct Device {
  float* p = nullptr;
  explicit Device(int n) { EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&p), n * sizeof(float)), cudaSuccess); }
  ~Device() { cudaFree(p); }
};

TEST(EmuStreams, AKernelRunsWhenItsStreamIsSynchronized) {
  Stream stream;
  std::vector<float> x(32, 1.0f);
  cuda_emu::launcher(add_one, 1, 32, 0, stream.s)(x.data());
  EXPECT_EQ(x[0], 1.0f);  // a host that read it now would race with the GPU
  EXPECT_EQ(cudaStreamSynchronize(stream.s), cudaSuccess);
  EXPECT_EQ(x, std::vector<float>(32, 2.0f));
}

TEST(EmuStreams, ACopyToPinnedMemoryLandsWhenTheHostWaitsForItsEvent) {
  Stream stream;
  Event copied;
  Device d(4);
  Pinned h(4);
  const std::vector<float> v = {1, 2, 3, 4};
  ASSERT_EQ(cudaMemcpy(d.p, v.data(), 4 * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  for (int i = 0; i < 4; ++i) h.p[i] = 0.0f;
  ASSERT_EQ(cudaMemcpyAsync(h.p, d.p, 4 * sizeof(float), cudaMemcpyDeviceToHost, stream.s), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(copied.e, stream.s), cudaSuccess);
  EXPECT_EQ(h.p[3], 0.0f);
  ASSERT_EQ(cudaEventSynchronize(copied.e), cudaSuccess);
  EXPECT_EQ(h.p[3], 4.0f);
}

// A pinned source is read when the copy runs: rewriting it before then changes what arrives. A
// pageable one is staged by the call (the driver copies it before returning).
TEST(EmuStreams, APinnedSourceIsReadWhenTheCopyRunsAPageableOneAtTheCall) {
  Stream stream;
  Device d(2);
  Pinned pinned(1);
  float pageable = 5.0f;
  pinned.p[0] = 5.0f;
  ASSERT_EQ(cudaMemcpyAsync(d.p, pinned.p, sizeof(float), cudaMemcpyHostToDevice, stream.s), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(d.p + 1, &pageable, sizeof(float), cudaMemcpyHostToDevice, stream.s), cudaSuccess);
  pinned.p[0] = 7.0f;
  pageable = 7.0f;
  ASSERT_EQ(cudaStreamSynchronize(stream.s), cudaSuccess);
  float back[2] = {};
  ASSERT_EQ(cudaMemcpy(back, d.p, sizeof back, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(back[0], 7.0f);
  EXPECT_EQ(back[1], 5.0f);
}

// Two non-blocking streams: without a wait, the copy stream's copy runs before the compute
// stream's kernel (the order a GPU may take); after cudaStreamWaitEvent, after it.
TEST(EmuStreams, AnotherStreamSeesAKernelsOutputOnlyAfterWaitingForItsEvent) {
  for (const bool wait : {false, true}) {
    Stream compute, copy;
    Event done;
    Device d(32);
    Pinned h(32);
    const std::vector<float> ones(32, 1.0f);
    ASSERT_EQ(cudaMemcpy(d.p, ones.data(), 32 * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
    cuda_emu::launcher(add_one, 1, 32, 0, compute.s)(d.p);
    ASSERT_EQ(cudaEventRecord(done.e, compute.s), cudaSuccess);
    if (wait) {
      ASSERT_EQ(cudaStreamWaitEvent(copy.s, done.e, 0), cudaSuccess);
    }
    ASSERT_EQ(cudaMemcpyAsync(h.p, d.p, 32 * sizeof(float), cudaMemcpyDeviceToHost, copy.s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(copy.s), cudaSuccess);
    EXPECT_EQ(h.p[31], wait ? 2.0f : 1.0f) << (wait ? "after the wait" : "without a wait");
    ASSERT_EQ(cudaStreamSynchronize(compute.s), cudaSuccess);
  }
}

// The legacy stream's synchronous copy waits for its own earlier work and the blocking streams',
// not for a non-blocking stream's.
TEST(EmuStreams, ASynchronousCopyWaitsForBlockingStreamsOnly) {
  for (const unsigned flags : {0u, cudaStreamNonBlocking}) {
    Stream stream(flags);
    Device d(32);
    const std::vector<float> ones(32, 1.0f);
    ASSERT_EQ(cudaMemcpy(d.p, ones.data(), 32 * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
    cuda_emu::launcher(add_one, 1, 32, 0, stream.s)(d.p);
    std::vector<float> back(32);
    ASSERT_EQ(cudaMemcpy(back.data(), d.p, 32 * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(back[0], flags == 0 ? 2.0f : 1.0f) << "stream flags " << flags;
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
}

TEST(EmuStreams, DeviceSynchronizeAndFreeRunEverythingQueued) {
  Stream a, b;
  std::vector<float> x(32, 0.0f), y(32, 0.0f);
  cuda_emu::launcher(add_one, 1, 32, 0, a.s)(x.data());
  cuda_emu::launcher(add_one, 1, 32, 0, b.s)(y.data());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(x[5] + y[5], 2.0f);
  {
    Device d(1);  // its cudaFree waits for the kernel below, which might still use other buffers
    cuda_emu::launcher(add_one, 1, 32, 0, a.s)(x.data());
  }
  EXPECT_EQ(x[5], 2.0f);
}

}  // namespace
