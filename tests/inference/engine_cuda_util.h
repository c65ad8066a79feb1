// Shared by the CUDA backend's engine tests (engine_cuda_test.cpp: behaviour against the CPU
// engine; engine_cuda_dtype_test.cpp: the storage types): the test models and prompts, the
// tolerances, engine options for either device, the CPU engine on the numbers the GPU stores,
// runs with hooks attached, and a controller that evicts and deactivates keys.
#pragma once
#include <gtest/gtest.h>

#include <span>
#include <string>
#include <vector>

#include "inference/cuda_backend.h"
#include "inference/engine.h"
#include "inference/generate.h"
#include "kernels/quant.h"
#include "tests/inference/capture.h"
#include "tests/inference/compare_rows.h"
#include "tests/inference/tiny_model.h"
#include "tests/test_paths.h"

namespace kvs::cuda_test {

inline const std::string kModels = test::shared_path("models/stories260K/");
inline const std::vector<int> kPromptIds = {1, 403, 407, 261, 378};  // "Once upon a time"
// Against the CPU on fp16-rounded weights and cache: the two sum in different orders, so a key
// can round to the neighbouring fp16 value on one side, and peaked heads amplify that: two CPU
// runs whose keys differ by 1e-7 (relative) before the rounding differ by up to 1.6e-3 on
// SmolLM2. Measured on the emulation, GPU against CPU: up to 2e-3 (fp16), 1e-3 (bf16, whose
// prefill activations go to the GEMMs in three bf16 parts; two carried only 16 bits and moved
// rows by up to 1.2e-2).
inline constexpr float kSameNumbersTol = 5e-3f;
inline constexpr float kFp32Tol = 1e-2f;  // against the plain fp32 CPU engine
// fp32 storage against the plain fp32 CPU engine: the same numbers, summed in other orders (the
// emulation measures 6e-6 on stories260K).
inline constexpr float kFp32StorageTol = 1e-4f;

#define SKIP_WITHOUT_GPU()                                                 \
  do {                                                                     \
    std::string why;                                                       \
    if (!cuda_usable(&why)) GTEST_SKIP() << "CUDA backend not usable: " << why; \
  } while (0)

// On device d; the GPU in fp16 unless asked otherwise (auto would store these small models in fp32).
inline EngineOptions on(Device d, bool rope_in_cache = false, GpuDtype dtype = GpuDtype::Fp16) {
  EngineOptions o;
  o.device = d;
  o.rope_in_cache = rope_in_cache;
  o.gpu_dtype = dtype;
  return o;
}

// The CPU engine on the numbers the GPU computes with: weights rounded to fp16 (or bf16), the
// cache likewise.
inline EngineOptions cpu_as_gpu(bool rope_in_cache = false, GpuDtype d = GpuDtype::Fp16) {
  EngineOptions o = on(Device::Cpu, rope_in_cache);
  o.kv_dtype = d == GpuDtype::Bf16 ? KvDtype::Bf16 : KvDtype::Fp16;
  return o;
}

// The model's weights as the GPU stores them in d (rounded to fp16 or bf16).
inline Model as_stored(const Model& m, GpuDtype d = GpuDtype::Fp16) {
  Model r = m;
  auto round = [d](PackedMatrix& m) {  // the panels' padding is zero, which rounds to zero
    const std::span<float> w = m.panels();
    if (d == GpuDtype::Bf16) {
      round_to_bf16(w.data(), w.size());
    } else {
      round_to_fp16(w.data(), w.size());
    }
  };
  round(r.weights.token_embedding);
  round(r.weights.classifier);
  for (LayerWeights& l : r.weights.layers) {
    for (PackedMatrix* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) round(*w);
  }
  return r;
}

inline std::vector<int> greedy(const Model& model, EngineOptions o, const std::vector<int>& prompt, int steps) {
  Engine engine(model, o);
  GenerateRequest req;
  req.prompt = prompt;
  req.steps = steps;
  req.stop_at_eos = false;
  return generate(engine, req);
}

using tiny::expect_same_rows;
using tiny::SkipPositions;

// Runs prompt + forced continuation with the hooks attached.
inline void forced_run(const Model& model, EngineOptions o, const std::vector<int>& prompt,
                       const std::vector<int>& forced, AttentionObserver* observer, CacheController* controller) {
  Engine engine(model, o);
  engine.set_observer(observer);
  engine.set_controller(controller);
  GenerateRequest req;
  req.prompt = prompt;
  req.steps = static_cast<int>(forced.size());
  req.forced = forced;
  req.stop_at_eos = false;
  generate(engine, req);
}

// Runs prompt + forced continuation with a Capture attached; returns it.
inline tiny::Capture capture_run(const Model& model, EngineOptions o, const std::vector<int>& prompt,
                                 const std::vector<int>& forced, CacheController* controller = nullptr) {
  tiny::Capture cap;
  forced_run(model, o, prompt, forced, &cap, controller);
  return cap;
}

// A stories260K prompt of 12 tokens for the controller tests.
inline const std::vector<int> kStoriesPrompt = {1, 403, 407, 261, 378, 11, 400, 300, 272, 345, 284, 262};

// Keeps `sink` first entries and the `recent` newest per KV head (evicting after attention), and
// leaves every third middle entry inactive in odd layers, so both the eviction and the
// inactive-row paths of the backend run. With `halves`, a head's entries go in two evictions, the
// older half first, so that rows freed by two evictions are taken by later appends.
class SinkWindowController : public CacheController {
 public:
  SinkWindowController(int sink, int recent, bool halves = false) : sink_(sink), recent_(recent), halves_(halves) {}
  void after_prefill(int, KvSlots& kv) override { trim(kv); }
  void before_attention(int layer, int, KvSlots& kv) override {
    if (layer % 2 == 0) return;
    for (int g = 0; g < kv.n_kv_heads(); ++g) {
      const auto held = kv.held(layer, g);
      const auto active = kv.active(layer, g);
      for (std::size_t i = sink_; i + 1 < held.size(); ++i) active[i] = held[i] % 3 != 0;
    }
  }
  void after_attention(int layer, int, std::span<const AttentionBlock>, KvSlots& kv) override {
    for (int g = 0; g < kv.n_kv_heads(); ++g) trim_head(kv, layer, g);
  }

 private:
  void trim(KvSlots& kv) {
    for (int l = 0; l < kv.n_layers(); ++l)
      for (int g = 0; g < kv.n_kv_heads(); ++g) trim_head(kv, l, g);
  }
  void trim_head(KvSlots& kv, int l, int g) {
    const int n = static_cast<int>(kv.held(l, g).size());
    const int gone = n - sink_ - recent_;
    if (gone <= 0) return;
    if (halves_ && gone >= 2) evict_middle(kv, l, g, gone / 2);
    evict_middle(kv, l, g, static_cast<int>(kv.held(l, g).size()) - sink_ - recent_);
  }
  // Evicts the `count` entries after the sink.
  void evict_middle(KvSlots& kv, int l, int g, int count) const {
    std::vector<uint8_t> keep(kv.held(l, g).size(), 1);
    for (int i = sink_; i < sink_ + count; ++i) keep[i] = 0;
    kv.evict(l, g, keep);
  }
  int sink_, recent_;
  bool halves_;
};

}  // namespace kvs::cuda_test
