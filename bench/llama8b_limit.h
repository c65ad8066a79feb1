// The Llama-3-8B shape the host-side benchmarks (bench_controller_host, bench_record_host) measure
// against, and the GPU's hooks-off decode step on it at the memory-bandwidth limit: the time a GPU
// takes to read the weights and the K/V once, which the host's share of a step should stay under.
#pragma once

namespace bench {

constexpr int kLayers8b = 32, kHeads8b = 32, kKvHeads8b = 8, kHeadDim8b = 128;
constexpr double kWeightBytes8b = 2.0 * 7.505e9;       // fp16 Llama-3-8B, classifier included
constexpr double kLayerWeightBytes8b = 2.0 * 6.979e9;  // fp16, the 32 layers' own
constexpr double kKvBytesPerPosition8b = 2.0 * 2 * kLayers8b * kKvHeads8b * kHeadDim8b;  // fp16 K and V
constexpr double kCopyBandwidth = 3.02e12;  // bytes/s, H100 (bench_cuda's copy bandwidth)

// Seconds of a hooks-off decode step at `context` keys at the limit.
constexpr double gpu_step_at_limit(int context) {
  return (kWeightBytes8b + kKvBytesPerPosition8b * context) / kCopyBandwidth;
}

}  // namespace bench
