// The CUDA backend's storage types against the CPU engine: auto's choice (by size, then type) and
// the names; bf16 storage against the CPU on bf16-rounded weights and cache (greedy tokens, rows,
// eviction, values past fp16's range); bf16 panels uploaded as their fp32 twin; fp32 storage
// against the plain CPU engine, to accumulation order. Without a GPU they skip; they also run on
// the CPU emulation of CUDA (tests/cuda_emu) as emu:* tests.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <vector>

#include "inference/engine.h"
#include "inference/loader.h"
#include "kernels/quant.h"
#include "kernels/quant_panels.h"
#include "tests/inference/engine_cuda_util.h"

namespace kvs::cuda_test {
namespace {

TEST(EngineCuda, AutoStoresSmallModelsInFp32Bf16CheckpointsInBf16AndTheRestInFp16) {
  const std::size_t small = kAutoFp32MaxBytes / sizeof(float), large = small + 1;  // 268M weights
  for (const char* type : {"F32", "F16", "Q4_1 (mixed)", "Q8_0", "", "BF16", "BF16 (mixed)"}) {
    EXPECT_EQ(auto_gpu_dtype(type, small), GpuDtype::Fp32) << type;
    EXPECT_EQ(auto_gpu_dtype(type, 135'000'000), GpuDtype::Fp32) << type << ": SmolLM2-135M's size";
  }
  for (const char* type : {"F32", "F16", "Q4_1 (mixed)", "Q8_0", ""}) {
    EXPECT_EQ(auto_gpu_dtype(type, large), GpuDtype::Fp16) << type;
    EXPECT_EQ(auto_gpu_dtype(type, 8'030'000'000), GpuDtype::Fp16) << type;
  }
  for (const char* type : {"BF16", "BF16 (mixed)"}) EXPECT_EQ(auto_gpu_dtype(type, large), GpuDtype::Bf16) << type;

  Model m = tiny::random_model(tiny::tiny_config(), 5);  // a model resolves by its own size and type
  for (const char* type : {"F32", "BF16"}) {
    m.weight_type = type;
    EXPECT_EQ(resolve_gpu_dtype(m, GpuDtype::Auto), GpuDtype::Fp32) << type;
    for (GpuDtype d : {GpuDtype::Fp16, GpuDtype::Bf16, GpuDtype::Fp32})
      EXPECT_EQ(resolve_gpu_dtype(m, d), d) << "an explicit choice stands";
  }
  EXPECT_STREQ(gpu_dtype_name(GpuDtype::Bf16), "bf16");
}

TEST(EngineCuda, GpuDtypeNamesParseBack) {
  for (GpuDtype d : {GpuDtype::Auto, GpuDtype::Fp16, GpuDtype::Bf16, GpuDtype::Fp32})
    EXPECT_EQ(parse_gpu_dtype(gpu_dtype_name(d)), d) << gpu_dtype_name(d);
  EXPECT_EQ(parse_gpu_dtype("fp8"), std::nullopt);
  EXPECT_EQ(parse_gpu_dtype("BF16"), std::nullopt) << "names are lower case, as --gpu-dtype takes them";
  EXPECT_EQ(parse_gpu_dtype(""), std::nullopt);
}

// bf16 storage: the same greedy tokens and rows as the CPU on bf16-rounded weights and cache.
TEST(EngineCuda, Bf16StorageMatchesTheCpuOnTheSameNumbers) {
  SKIP_WITHOUT_GPU();
  if (!std::filesystem::exists(kModels + "stories260K.bin")) GTEST_SKIP() << "stories260K.bin not found";
  const Model model = load_model(kModels + "stories260K.bin");
  const Model rounded = as_stored(model, GpuDtype::Bf16);
  const EngineOptions cpu = cpu_as_gpu(false, GpuDtype::Bf16), gpu = on(Device::Cuda, false, GpuDtype::Bf16);
  const std::vector<int> forced = greedy(rounded, cpu, kPromptIds, 40);
  EXPECT_EQ(forced, greedy(model, gpu, kPromptIds, 40));
  expect_same_rows(capture_run(rounded, cpu, kPromptIds, forced), capture_run(model, gpu, kPromptIds, forced),
                   kSameNumbersTol);
}

// A model whose matrices sit in bf16 panels, as an HF folder's bf16 tensors load, uploads the
// numbers of its fp32 twin: the GPU's rows are the twin's, bit for bit. So does one whose wo and
// w_down carry a multiplier no bf16 weight times it stays in bf16 (Granite's residual 0.22:
// PackedMatrix::factor), against the twin with it folded into its fp32 weights.
TEST(EngineCuda, Bf16PanelsUploadAsTheirFp32Twin) {
  SKIP_WITHOUT_GPU();
  if (!std::filesystem::exists(kModels + "stories260K.bin")) GTEST_SKIP() << "stories260K.bin not found";
  Model twin = as_stored(load_model(kModels + "stories260K.bin"), GpuDtype::Bf16);  // fp32 panels
  Model panels = twin;
  std::vector<std::vector<uint8_t>> encoded;  // each matrix's bf16 values, row-major
  PackQueue queue;
  auto to_bf16 = [&](PackedMatrix& m) {
    const WeightVector w = m.unpacked();
    std::vector<uint8_t>& bytes = encoded.emplace_back(2 * w.size());
    for (std::size_t i = 0; i < w.size(); ++i) {
      const uint16_t h = fp32_to_bf16(w[i]);
      bytes[2 * i] = static_cast<uint8_t>(h & 0xff), bytes[2 * i + 1] = static_cast<uint8_t>(h >> 8);
    }
    queue.add_quantized(m, m.rows, m.cols, ops::QuantFormat::BF16, bytes.data(), {});
  };
  encoded.reserve(2 + 7 * panels.weights.layers.size());
  to_bf16(panels.weights.token_embedding);
  for (LayerWeights& l : panels.weights.layers)
    for (PackedMatrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) to_bf16(*m);
  queue.pack("stories260K in bf16 panels");
  ASSERT_EQ(panels.matrix_count().as_stored, panels.matrix_count().matrices);
  const EngineOptions gpu = on(Device::Cuda, false, GpuDtype::Bf16);
  for (const bool multiplied : {false, true}) {
    SCOPED_TRACE(multiplied ? "residual multiplier 0.22" : "as stored");
    if (multiplied) {
      scale_block_outputs(twin, 0.22f);
      scale_block_outputs(panels, 0.22f);
      ASSERT_EQ(panels.weights.layers[0].w_down.factor, 0.22f);
      ASSERT_EQ(panels.matrix_count().as_stored, panels.matrix_count().matrices);
    }
    const std::vector<int> forced = greedy(twin, gpu, kPromptIds, 40);
    EXPECT_EQ(forced, greedy(panels, gpu, kPromptIds, 40));
    const tiny::Capture want = capture_run(twin, gpu, kPromptIds, forced);
    const tiny::Capture got = capture_run(panels, gpu, kPromptIds, forced);
    ASSERT_EQ(got.rows.size(), want.rows.size());
    for (std::size_t i = 0; i < want.rows.size(); ++i) ASSERT_EQ(got.rows[i].probs, want.rows[i].probs) << "row " << i;
  }
}

TEST(EngineCuda, Bf16GqaRotateHalfAndEvictionMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  const Model model = tiny::to_rotate_half(tiny::random_model(tiny::tiny_config(), 23));  // GQA
  const std::vector<int> prompt = {1, 5, 9, 2, 7, 3, 8, 4, 6, 10, 12, 14, 3, 17, 22, 9};
  const std::vector<int> forced = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8};
  for (bool rope_in_cache : {false, true}) {
    SinkWindowController cpu_ctl(2, 6), gpu_ctl(2, 6);
    SCOPED_TRACE(rope_in_cache ? "rope in cache" : "rope at position");
    // With keys cached before rotation, the GPU's prefill GEMMs read the rotated keys rounded to
    // bf16 once more, where the CPU rotates the cached bf16 keys in fp32 as both decode steps do:
    // prompt rows up to 6.7e-3 apart on this model.
    expect_same_rows(capture_run(as_stored(model, GpuDtype::Bf16), cpu_as_gpu(rope_in_cache, GpuDtype::Bf16),
                                 prompt, forced, &cpu_ctl),
                     capture_run(model, on(Device::Cuda, rope_in_cache, GpuDtype::Bf16), prompt, forced, &gpu_ctl),
                     rope_in_cache ? 1e-2f : kSameNumbersTol);
  }
}

// fp32 storage: the plain fp32 CPU engine's greedy tokens, and its rows to accumulation order, in
// prefill and decode, with a controller that evicts and deactivates keys (both RoPE caches), on
// stories260K and on GQA, rotate-half and biased models.
TEST(EngineCuda, Fp32StorageMatchesThePlainCpuEngine) {
  SKIP_WITHOUT_GPU();
  if (!std::filesystem::exists(kModels + "stories260K.bin")) GTEST_SKIP() << "stories260K.bin not found";
  const Model model = load_model(kModels + "stories260K.bin");
  const EngineOptions gpu = on(Device::Cuda, false, GpuDtype::Fp32);
  const std::vector<int> forced = greedy(model, on(Device::Cpu), kPromptIds, 40);
  EXPECT_EQ(forced, greedy(model, gpu, kPromptIds, 40));
  {  // four bytes a value: twice fp16's cache for the same entries
    Engine fp32(model, gpu), fp16(model, on(Device::Cuda, false, GpuDtype::Fp16));
    fp32.prefill(kPromptIds);
    fp16.prefill(kPromptIds);
    EXPECT_EQ(fp32.kv_bytes(), 2 * fp16.kv_bytes());
  }
  const tiny::Capture g = capture_run(model, gpu, kPromptIds, forced);
  expect_same_rows(capture_run(model, on(Device::Cpu), kPromptIds, forced), g, kFp32StorageTol);
  // Auto stores a model this small in fp32 (a bf16 checkpoint too): the same bits as asked.
  for (const char* type : {"F32", "BF16"}) {
    Model typed = model;
    typed.weight_type = type;
    const tiny::Capture automatic = capture_run(typed, on(Device::Cuda, false, GpuDtype::Auto), kPromptIds, forced);
    ASSERT_EQ(automatic.rows.size(), g.rows.size());
    for (std::size_t i = 0; i < g.rows.size(); ++i) ASSERT_EQ(automatic.rows[i].probs, g.rows[i].probs) << type << i;
  }
  const std::vector<int> continued = greedy(model, on(Device::Cpu), kStoriesPrompt, 20);
  for (bool rope_in_cache : {false, true}) {
    SinkWindowController cpu_ctl(2, 8), gpu_ctl(2, 8);
    SCOPED_TRACE(rope_in_cache ? "rope in cache" : "rope at position");
    expect_same_rows(capture_run(model, on(Device::Cpu, rope_in_cache), kStoriesPrompt, continued, &cpu_ctl),
                     capture_run(model, on(Device::Cuda, rope_in_cache, GpuDtype::Fp32), kStoriesPrompt, continued,
                                 &gpu_ctl),
                     kFp32StorageTol);
  }
  ModelConfig c = tiny::tiny_config();  // GQA
  const Model rotate_half = tiny::to_rotate_half(tiny::random_model(c, 31));
  c.qkv_bias = true;
  const Model biased = tiny::to_rotate_half(tiny::random_model(c, 32));
  c.qkv_bias = false;
  c.qk_norm = true;
  const Model qk_normed = tiny::to_rotate_half(tiny::random_model(c, 33));
  const Model olmo2 = tiny::random_model(tiny::olmo2_config(), 34);
  const std::vector<int> prompt = {1, 5, 9, 2, 7, 3, 8, 4, 6, 10, 12, 14};
  const std::vector<int> tail = {3, 1, 4, 1, 5, 9, 2, 6};
  for (const Model* m : {&rotate_half, &biased, &qk_normed, &olmo2}) {
    expect_same_rows(capture_run(*m, on(Device::Cpu), prompt, tail),
                     capture_run(*m, on(Device::Cuda, false, GpuDtype::Fp32), prompt, tail), kFp32StorageTol);
  }
}

// Values past fp16's range (65504), as some checkpoints produce: an fp16 cache turns them into
// infinities and the rows into NaN; a bf16 cache keeps fp32's range and matches the CPU.
TEST(EngineCuda, Bf16KeepsValuesThatOverflowFp16) {
  SKIP_WITHOUT_GPU();
  Model model = tiny::random_model(tiny::tiny_config(), 29);
  for (LayerWeights& l : model.weights.layers) {
    for (float& w : l.wv.panels()) w *= 2e5f;  // |w| < 4e4: representable in fp16, the values it makes are not
  }
  const std::vector<int> prompt = {1, 5, 9, 2, 7, 3, 8, 4};
  const std::vector<int> forced = {3, 1, 4, 1, 5};
  auto all_finite = [](const tiny::Capture& c) {
    for (const auto& l : c.logits)
      for (float x : l)
        if (!std::isfinite(x)) return false;
    return true;
  };
  const tiny::Capture fp16 = capture_run(model, on(Device::Cuda, false, GpuDtype::Fp16), prompt, forced);
  EXPECT_FALSE(all_finite(fp16)) << "the test model should overflow an fp16 cache";
  const tiny::Capture bf16 = capture_run(model, on(Device::Cuda, false, GpuDtype::Bf16), prompt, forced);
  EXPECT_TRUE(all_finite(bf16));
  expect_same_rows(capture_run(as_stored(model, GpuDtype::Bf16), cpu_as_gpu(false, GpuDtype::Bf16), prompt, forced),
                   bf16, kSameNumbersTol);
}

}  // namespace
}  // namespace kvs::cuda_test
