// The CUDA backend against the CPU engine: same greedy tokens on stories260K (and SmolLM2 when
// fetched); every attention row within 5e-3 of the CPU engine computing on the same numbers (the
// weights rounded to fp16 as the GPU stores them, EngineOptions::kv_dtype), and within 1e-2 of
// the plain fp32 CPU engine; the device-side prefill reductions against the CPU's rows; eviction
// and inactive keys through a controller; the pos-shift cache; sliding-window attention; a cache
// that grows; out of GPU memory (the storage types: engine_cuda_dtype_test.cpp). Without a GPU (or
// a CUDA build) these skip, except the fallback checks, which run only there. They also run on the
// CPU emulation of CUDA (tests/cuda_emu) as emu:* tests.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include "analysis/prefill_evidence.h"
#include "inference/cuda_backend.h"
#include "inference/engine.h"
#include "inference/errors.h"
#include "inference/generate.h"
#include "inference/loader.h"
#include "tests/inference/engine_cuda_util.h"
#include "tests/inference/forced_logits.h"

namespace kvs::cuda_test {
namespace {

// n token ids 1 + (i * stride) mod (vocab - 1): a long prompt or continuation for a random model.
std::vector<int> stepped_tokens(int n, int stride, int vocab) {
  std::vector<int> ids(n);
  for (int i = 0; i < n; ++i) ids[i] = 1 + (i * stride) % (vocab - 1);
  return ids;
}

// The tiny random model with room for 1,024 positions: past the device cache's first 256 rows.
Model roomy_tiny_model(uint64_t seed) {
  ModelConfig c = tiny::tiny_config();
  c.seq_len = 1024;
  return tiny::random_model(c, seed);
}

TEST(EngineCuda, WithoutAGpuTheBackendRefusesWithTheReason) {
  std::string why;
  if (cuda_usable(&why)) GTEST_SKIP() << "a GPU is present";
  EXPECT_FALSE(why.empty());
  const Model model = tiny::random_model(tiny::tiny_config(), 7);
  try {
    Engine engine(model, on(Device::Cuda));
    FAIL() << "constructed a CUDA engine without a usable GPU";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(why.substr(0, 20)), std::string::npos) << e.what();
  }
  Engine cpu(model, on(Device::Cpu));  // the CPU path is untouched
  EXPECT_EQ(cpu.prefill(std::vector<int>{1, 2, 3}).size(), static_cast<std::size_t>(model.config.vocab_size));
}

TEST(EngineCuda, Stories260KGreedyTokensEqualTheCpus) {
  SKIP_WITHOUT_GPU();
  for (const std::string file : {"stories260K.bin", "stories260K.gguf"}) {
    if (!std::filesystem::exists(kModels + file)) continue;
    const Model model = load_model(kModels + file);
    EXPECT_EQ(greedy(model, on(Device::Cpu), kPromptIds, 60), greedy(model, on(Device::Cuda), kPromptIds, 60)) << file;
  }
}

TEST(EngineCuda, SmolLM2GreedyTokensEqualTheCpusWhenPresent) {
  SKIP_WITHOUT_GPU();
  const std::string path = default_model_path();
  if (path.empty()) GTEST_SKIP() << "SmolLM2-135M-Instruct is not in the model cache";
  const Model model = load_model(path);
  const auto tok = load_tokenizer(model, "");
  const std::vector<int> prompt = tok->encode(
      "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n", tok->add_bos());
  EXPECT_EQ(greedy(model, on(Device::Cpu), prompt, 24), greedy(model, on(Device::Cuda), prompt, 24));
}

TEST(EngineCuda, AttentionRowsMatchTheCpusInPrefillAndDecode) {
  SKIP_WITHOUT_GPU();
  if (!std::filesystem::exists(kModels + "stories260K.bin")) GTEST_SKIP() << "stories260K.bin not found";
  const Model model = load_model(kModels + "stories260K.bin");
  const std::vector<int> forced = greedy(model, on(Device::Cpu), kPromptIds, 40);
  const tiny::Capture gpu = capture_run(model, on(Device::Cuda), kPromptIds, forced);
  const tiny::Capture cpu = capture_run(as_stored(model), cpu_as_gpu(), kPromptIds, forced);
  expect_same_rows(cpu, gpu, kSameNumbersTol);
  expect_same_rows(capture_run(model, on(Device::Cpu), kPromptIds, forced), gpu, kFp32Tol);
  ASSERT_EQ(cpu.tokens, gpu.tokens);
  ASSERT_EQ(cpu.logits_pos, gpu.logits_pos);
  EXPECT_EQ(gpu.prefill_end, static_cast<int>(kPromptIds.size()));
}

TEST(EngineCuda, GqaRotateHalfBiasedQkNormedOlmoYarnLongRopeAndNoPEModelsMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  ModelConfig c = tiny::tiny_config();  // GQA
  const Model interleaved = tiny::random_model(c, 11);
  const Model rotate_half = tiny::to_rotate_half(interleaved);
  c.qkv_bias = true;  // Qwen2's q/k/v biases, added inside the decode product
  const Model biased = tiny::to_rotate_half(tiny::random_model(c, 12));
  c.qkv_bias = false;
  c.qk_norm = true;  // Qwen3's per-head norms of q and k, after the decode product
  const Model qk_normed = tiny::to_rotate_half(tiny::random_model(c, 13));
  // OLMo 2: no norm before the blocks (the products read the residual as it is), norms after
  // them, q and k normalised across all heads (decode: two launches before rope_append)
  const Model olmo2 = tiny::random_model(tiny::olmo2_config(), 14);
  // YaRN: blended frequencies, and the RoPE tables scaled by its attention factor
  const Model yarn = [&] {
    Model m = rotate_half;
    m.config.rope_scaling.type = "yarn";
    m.config.rope_scaling.factor = 4.0f;
    m.config.rope_scaling.original_max_position = 16;
    m.config.rope_scaling.attention_factor = 1.3f;
    return m;
  }();
  // LongRoPE: the prompt's 12 positions within an original context of 14, decoding past it (the
  // new tokens rotated with the long factors)
  const Model longrope = [&] {
    Model m = rotate_half;
    m.config = tiny::with_longrope(m.config, 14, 1.2f);
    return m;
  }();
  const std::vector<int> prompt = {1, 5, 9, 2, 7, 3, 8, 4, 6, 10, 12, 14};
  const std::vector<int> forced = {3, 1, 4, 1, 5, 9, 2, 6};
  const Model smollm3 = tiny::random_model(tiny::smollm3_config(), 15);  // a NoPE layer beside rotating ones
  // Phi-4-mini's partial rotation: 4 of 8 dims a head, its q/k rows permuted on load, LongRoPE's
  // attention factor on the rotated pairs only
  const Model partial = [&] {
    Model m = rotate_half;
    m.config = tiny::with_longrope(m.config, 14, 1.2f);
    m.config.rotary_dim = 4;
    m.config.rope_scaling.short_factor.resize(2);
    m.config.rope_scaling.long_factor.resize(2);
    permute_partial_rotary(m);
    return m;
  }();
  const Model exaone4 = tiny::random_model(tiny::exaone4_config(), 16);  // scaled local layers, a NoPE global one
  for (const Model* m :
       {&interleaved, &rotate_half, &biased, &qk_normed, &olmo2, &yarn, &longrope, &smollm3, &partial, &exaone4}) {
    SCOPED_TRACE(m->config.arch + " " + m->config.rope_scaling.type + " rotating " + std::to_string(m->config.rot_dim()));
    expect_same_rows(capture_run(as_stored(*m), cpu_as_gpu(), prompt, forced),
                     capture_run(*m, on(Device::Cuda), prompt, forced), kSameNumbersTol);
  }
}

// Gemma 3: local layers (a window of 4, their own RoPE tables) beside a global one, the norms
// after each block, GeGLU and scaled embeddings, in prefill, decode and a batched extend, and
// with RoPE applied in the cache (the batched extend: ExtendGivesTheCpusRowsAndLastLogits).
TEST(EngineCuda, Gemma3LocalAndGlobalLayersMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  const Model model = tiny::random_model(tiny::gemma3_config(), 39);
  const std::vector<int> prompt = {1, 5, 9, 2, 7, 3, 8, 4, 6, 10, 12, 14};
  const std::vector<int> forced = {3, 1, 4, 1, 5, 9, 2, 6};
  for (bool rope_in_cache : {false, true}) {
    SCOPED_TRACE(rope_in_cache ? "rope in cache" : "rope at position");
    EngineOptions cpu = cpu_as_gpu();
    cpu.prefill_block = 12;  // the prompt's rows in one block, as the GPU sends them
    cpu.rope_in_cache = rope_in_cache;
    expect_same_rows(capture_run(as_stored(model), cpu, prompt, forced),
                     capture_run(model, on(Device::Cuda, rope_in_cache), prompt, forced), kSameNumbersTol);
  }
}

// Gemma 2: every other layer local, scores soft-capped in prefill's softmax and decode's splits,
// logits soft-capped after the classifier; each step's logits against the CPU's on the GPU's
// numbers (fp16), and the plain CPU engine's with fp32 storage.
TEST(EngineCuda, Gemma2SoftCapsMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  const Model model = tiny::random_model(tiny::gemma2_config(), 41);
  const std::vector<int> prompt = {1, 5, 9, 2, 7, 3, 8, 4, 6, 10, 12, 14};
  const std::vector<int> forced = {3, 1, 4, 1, 5, 9, 2, 6};
  auto expect_same_logits = [](const tiny::Capture& want, const tiny::Capture& got, float tol) {
    ASSERT_EQ(want.logits.size(), got.logits.size());
    for (std::size_t s = 0; s < want.logits.size(); ++s)
      for (std::size_t i = 0; i < want.logits[s].size(); ++i)
        ASSERT_NEAR(got.logits[s][i], want.logits[s][i], tol) << "logits event " << s << " token " << i;
  };
  EngineOptions cpu = cpu_as_gpu();
  cpu.prefill_block = 12;  // the prompt's rows in one block, as the GPU sends them
  const tiny::Capture want = capture_run(as_stored(model), cpu, prompt, forced);
  const tiny::Capture got = capture_run(model, on(Device::Cuda), prompt, forced);
  expect_same_rows(want, got, kSameNumbersTol);
  expect_same_logits(want, got, 2e-2f);
  EngineOptions plain = on(Device::Cpu);
  plain.prefill_block = 12;
  const tiny::Capture exact = capture_run(model, on(Device::Cuda, false, GpuDtype::Fp32), prompt, forced);
  const tiny::Capture reference = capture_run(model, plain, prompt, forced);
  expect_same_rows(reference, exact, kFp32StorageTol);
  expect_same_logits(reference, exact, 1e-4f);
}

TEST(EngineCuda, SlidingWindowMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  ModelConfig c = tiny::tiny_config();
  c.sliding_window = 5;
  const Model model = tiny::random_model(c, 19);
  const std::vector<int> prompt = {1, 5, 9, 2, 7, 3, 8, 4, 6, 10, 12, 14};
  const std::vector<int> forced = {3, 1, 4, 1, 5, 9, 2, 6};
  EngineOptions cpu = cpu_as_gpu();
  cpu.prefill_block = 12;  // the prompt's rows in one block, as the GPU sends them
  expect_same_rows(capture_run(as_stored(model), cpu, prompt, forced),
                   capture_run(model, on(Device::Cuda), prompt, forced), kSameNumbersTol);
}

TEST(EngineCuda, ControllerEvictionAndInactiveKeysMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  if (!std::filesystem::exists(kModels + "stories260K.bin")) GTEST_SKIP() << "stories260K.bin not found";
  const Model model = load_model(kModels + "stories260K.bin");
  const std::vector<int>& prompt = kStoriesPrompt;
  const std::vector<int> forced = greedy(model, on(Device::Cpu), prompt, 40);
  for (bool rope_in_cache : {false, true}) {
    SinkWindowController cpu_ctl(2, 8), gpu_ctl(2, 8);
    const tiny::Capture cpu = capture_run(as_stored(model), cpu_as_gpu(rope_in_cache), prompt, forced, &cpu_ctl);
    const tiny::Capture gpu = capture_run(model, on(Device::Cuda, rope_in_cache), prompt, forced, &gpu_ctl);
    SCOPED_TRACE(rope_in_cache ? "rope in cache" : "rope at position");
    expect_same_rows(cpu, gpu, kSameNumbersTol);
  }
}

// A head's evictions within one callback composed on the device: prefill leaves 30 entries, the
// controller evicts 20 of them in two evictions (and later one a step). The device rows then hold
// what one eviction of the same entries leaves, so every row is the same, bit for bit.
TEST(EngineCuda, EvictionsComposedWithinACallbackEqualOneEviction) {
  SKIP_WITHOUT_GPU();
  if (!std::filesystem::exists(kModels + "stories260K.bin")) GTEST_SKIP() << "stories260K.bin not found";
  const Model model = load_model(kModels + "stories260K.bin");
  std::vector<int> prompt = {1};
  for (int i = 1; i < 30; ++i) prompt.push_back(300 + 7 * i);
  const std::vector<int> forced = greedy(model, on(Device::Cpu), prompt, 12);
  SinkWindowController at_once(3, 7), in_halves(3, 7, true);
  const tiny::Capture once = capture_run(model, on(Device::Cuda, false), prompt, forced, &at_once);
  const tiny::Capture halves = capture_run(model, on(Device::Cuda, false), prompt, forced, &in_halves);
  expect_same_rows(once, halves, 0.0f);
}

// Rows nobody reads stay on the device: with an observer that reads no decode rows and a
// controller that reads them at odd layers only, the backend copies and waits for none at even
// layers (the controller evicts there without them), and the run computes what it computes when
// both read every row: the same logits, bit for bit.
TEST(EngineCuda, RowsNobodyReadsStayOnTheDevice) {
  SKIP_WITHOUT_GPU();
  if (!std::filesystem::exists(kModels + "stories260K.bin")) GTEST_SKIP() << "stories260K.bin not found";
  const Model model = load_model(kModels + "stories260K.bin");
  const std::vector<int> forced = greedy(model, on(Device::Cpu), kStoriesPrompt, 16);
  SinkWindowController all_rows(2, 8), inner(2, 8);
  const tiny::Capture reads_all = capture_run(model, on(Device::Cuda), kStoriesPrompt, forced, &all_rows);
  tiny::CaptureWithoutDecodeRows observer;
  tiny::OddLayersReadRows controller(inner);
  forced_run(model, on(Device::Cuda), kStoriesPrompt, forced, &observer, &controller);
  tiny::expect_rows_only_where_read(observer, controller, reads_all, model.config.n_heads,
                                    static_cast<int>(forced.size()), model.config.n_layers);
}

// Key rankings (OmniKV's filter layers ask for them): at even layers, where every KV head attends
// the same keys, the device ranks the rows, which stay there when no hook reads them; at odd
// layers, where SinkWindowController leaves keys inactive, the host ranks them from the rows. Each
// ranking is the ranking of the rows the controller then reads (RankingSpy), the same when it
// reads none, and nearly the CPU's on the same numbers (only keys whose logits the fp16 cache
// moves past each other may differ).
TEST(EngineCuda, KeyRankingsRankTheRowsOnTheDeviceOrTheHost) {
  SKIP_WITHOUT_GPU();
  if (!std::filesystem::exists(kModels + "stories260K.bin")) GTEST_SKIP() << "stories260K.bin not found";
  const Model model = load_model(kModels + "stories260K.bin");
  const std::vector<int> forced = greedy(model, on(Device::Cpu), kStoriesPrompt, 16);
  const KeyRanking ranking{4, static_cast<int>(kStoriesPrompt.size())};
  SinkWindowController a(2, 8), b(2, 8), c(2, 8);
  tiny::RankingSpy reads(a, ranking, true, 1e-5f), blind(b, ranking, false), cpu(c, ranking, true);
  tiny::CaptureWithoutDecodeRows with_rows, without_rows;
  forced_run(model, on(Device::Cuda), kStoriesPrompt, forced, &with_rows, &reads);
  forced_run(model, on(Device::Cuda), kStoriesPrompt, forced, &without_rows, &blind);
  forced_run(as_stored(model), cpu_as_gpu(), kStoriesPrompt, forced, nullptr, &cpu);
  ASSERT_EQ(reads.rankings.size(), forced.size() * model.config.n_layers);
  EXPECT_EQ(blind.rankings, reads.rankings);
  EXPECT_EQ(with_rows.logits, without_rows.logits);
  ASSERT_EQ(cpu.rankings.size(), reads.rankings.size());
  std::size_t ranked = 0, same = 0;
  for (std::size_t i = 0; i < cpu.rankings.size(); ++i) {
    ASSERT_EQ(cpu.rankings[i].size(), reads.rankings[i].size());
    ranked += cpu.rankings[i].size();
    for (int32_t p : reads.rankings[i]) same += std::binary_search(cpu.rankings[i].begin(), cpu.rankings[i].end(), p);
  }
  EXPECT_GE(same, ranked * 95 / 100) << same << " of " << ranked << " ranked keys as on the CPU";
}

// Group rows (H2O and TOVA ask for them) are made on the device from the rows, which stay there
// when no hook reads them; at odd layers SinkWindowController leaves keys inactive, so the rows
// are over listed keys. They are the host's reduction of the rows the controller then reads, bit
// for bit, for every reduction (GroupSpy); the same when it reads none; and within the rows'
// tolerance of the CPU's on the same numbers (a sum over a group of two: twice it).
TEST(EngineCuda, GroupRowsAreTheHostsReductionMadeOnTheDevice) {
  SKIP_WITHOUT_GPU();
  if (!std::filesystem::exists(kModels + "stories260K.bin")) GTEST_SKIP() << "stories260K.bin not found";
  const Model model = load_model(kModels + "stories260K.bin");
  const std::vector<int> forced = greedy(model, on(Device::Cpu), kStoriesPrompt, 16);
  for (ops::GroupReduce how : {ops::GroupReduce::Mean, ops::GroupReduce::Max}) {
    SinkWindowController ctl(2, 8);
    tiny::GroupSpy reads(ctl, how, true);
    forced_run(model, on(Device::Cuda), kStoriesPrompt, forced, nullptr, &reads);
    EXPECT_EQ(reads.values.size(), forced.size() * model.config.n_layers);
  }
  const ops::GroupReduce sum = ops::GroupReduce::Sum;
  SinkWindowController a(2, 8), b(2, 8), c(2, 8);
  tiny::GroupSpy reads(a, sum, true), blind(b, sum, false), cpu(c, sum, true);
  tiny::CaptureWithoutDecodeRows with_rows, without_rows;
  forced_run(model, on(Device::Cuda), kStoriesPrompt, forced, &with_rows, &reads);
  forced_run(model, on(Device::Cuda), kStoriesPrompt, forced, &without_rows, &blind);
  forced_run(as_stored(model), cpu_as_gpu(), kStoriesPrompt, forced, nullptr, &cpu);
  ASSERT_EQ(reads.values.size(), forced.size() * model.config.n_layers);
  EXPECT_EQ(blind.keys, reads.keys);
  EXPECT_EQ(blind.values, reads.values);
  EXPECT_EQ(with_rows.logits, without_rows.logits);
  ASSERT_EQ(cpu.keys, reads.keys);
  const float tol = kSameNumbersTol * model.config.group();
  float worst = 0.0f;
  for (std::size_t i = 0; i < cpu.values.size(); ++i)
    for (std::size_t g = 0; g < cpu.values[i].size(); ++g)
      for (std::size_t j = 0; j < cpu.values[i][g].size(); ++j)
        worst = std::max(worst, std::fabs(cpu.values[i][g][j] - reads.values[i][g][j]));
  EXPECT_LE(worst, tol) << "group rows vs the CPU's on the same numbers";
}

// The device cache starts at 256 rows per head and doubles as the sequence grows: a prompt of
// 250 and a continuation past position 256 (a growth mid-decode) attend exactly as the CPU does
// on the same numbers — also with a controller that keeps 256 entries per head, so every step
// after writes its entry into a row an eviction freed, and skips keys in odd layers.
TEST(EngineCuda, CacheRowsGrowWithTheSequence) {
  SKIP_WITHOUT_GPU();
  const Model model = roomy_tiny_model(13);
  const int vocab = model.config.vocab_size;
  const std::vector<int> prompt = stepped_tokens(250, 7, vocab), forced = stepped_tokens(12, 11, vocab);
  EngineOptions cpu = cpu_as_gpu();
  cpu.prefill_block = 250;  // the prompt's rows in one block, as the GPU sends them
  expect_same_rows(capture_run(as_stored(model), cpu, prompt, forced),
                   capture_run(model, on(Device::Cuda), prompt, forced), kSameNumbersTol);
  SinkWindowController cpu_ctl(4, 252), gpu_ctl(4, 252);
  expect_same_rows(capture_run(as_stored(model), cpu, prompt, forced, &cpu_ctl),
                   capture_run(model, on(Device::Cuda), prompt, forced, &gpu_ctl), kSameNumbersTol);
}

// Each KV head evicts on its own schedule and leaves a key inactive on some steps, so within one
// layer some heads attend every entry they hold (their device lists edited by the step's
// eviction and append) while others attend a list given whole, and a head goes from one kind to
// the other and back (its device list then sent whole again); on some steps every head skips a
// key, each its own (lists given whole, each head's) or all the same one (one list given, which
// the heads share); the rows grow past 256 while the lists are in use. Every row equals the CPU's
// on the same numbers.
class EachHeadItsOwnWay : public CacheController {
 public:
  void after_prefill(int, KvSlots& kv) override {
    for (int l = 0; l < kv.n_layers(); ++l) evict(kv, l, 0, 5);  // head 0 out of row order from the start
  }
  void before_attention(int layer, int pos, KvSlots& kv) override {
    for (int g = 0; g < kv.n_kv_heads(); ++g) {
      const std::span<uint8_t> active = kv.active(layer, g);
      std::fill(active.begin(), active.end(), uint8_t{1});
      if ((pos + g + layer) % 3 == 0) active[active.size() / 2] = 0;
      if ((pos + layer) % 5 == 0) active[1 + g] = 0;  // every head, each its own key
      if ((pos + layer) % 7 == 0) active[2] = 0;      // every head the same key
    }
  }
  void after_attention(int layer, int pos, std::span<const AttentionBlock>, KvSlots& kv) override {
    for (int g = 0; g < kv.n_kv_heads(); ++g) {
      if ((pos + g) % 2 == 0) evict(kv, layer, g, 3 + pos % 11);
    }
  }

 private:
  static void evict(KvSlots& kv, int l, int g, int i) {
    std::vector<uint8_t> keep(kv.held(l, g).size(), 1);
    keep[i] = 0;
    kv.evict(l, g, keep);
  }
};

TEST(EngineCuda, RowListsEditedOnTheDeviceMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  const Model model = roomy_tiny_model(19);
  const int vocab = model.config.vocab_size;
  const std::vector<int> prompt = stepped_tokens(246, 7, vocab), forced = stepped_tokens(24, 13, vocab);
  for (bool rope_in_cache : {false, true}) {
    SCOPED_TRACE(rope_in_cache ? "rope in cache" : "rope at position");
    EngineOptions cpu = cpu_as_gpu(rope_in_cache);
    cpu.prefill_block = 246;  // the prompt's rows in one block, as the GPU sends them
    EachHeadItsOwnWay cpu_ctl, gpu_ctl;
    expect_same_rows(capture_run(as_stored(model), cpu, prompt, forced, &cpu_ctl),
                     capture_run(model, on(Device::Cuda, rope_in_cache), prompt, forced, &gpu_ctl),
                     kSameNumbersTol);
  }
}

// A rewound GPU engine computes what a fresh one does on the same tokens (KVzip's repeat passes
// rewind to the context after each chunk), also after the cache's rows grew past the rewind.
TEST(EngineCuda, RewindForgetsTheLaterPositions) {
  SKIP_WITHOUT_GPU();
  const Model model = roomy_tiny_model(17);
  const int vocab = model.config.vocab_size;
  const std::vector<int> prompt = stepped_tokens(250, 5, vocab);
  Engine fresh(model, on(Device::Cuda)), rewound(model, on(Device::Cuda));
  fresh.prefill(prompt);
  const std::span<const float> f = fresh.decode(3);
  const std::vector<float> want(f.begin(), f.end());
  rewound.prefill(prompt);
  for (int i = 0; i < 10; ++i) rewound.decode(1 + i);  // past 256 rows: the cache grows
  rewound.rewind(250);
  EXPECT_EQ(rewound.pos(), 250);
  EXPECT_EQ(rewound.kv_bytes(), fresh.kv_bytes() * 250 / 251);
  const std::span<const float> got = rewound.decode(3);
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6f) << "logit " << i;
}

// A run started from a snapshot of the prompt's prefill (its K and V copied on the device), its
// controller compressing the restored cache, computes what a run that prefilled the prompt does,
// in every storage type and with rope_in_cache; also after a run in between grew the cache past
// the prompt's rows and evicted from it.
TEST(EngineCuda, ARunFromAPrefillSnapshotEqualsOneThatPrefilled) {
  SKIP_WITHOUT_GPU();
  const Model model = roomy_tiny_model(23);
  const int vocab = model.config.vocab_size;
  const std::vector<int> prompt = stepped_tokens(200, 5, vocab), forced = stepped_tokens(60, 3, vocab);
  // The logits each forced token was chosen from, under a sink-and-window controller.
  auto run = [&](Engine& engine, const PrefillSnapshot* from) {
    SinkWindowController controller(4, 150);
    return test::forced_logits(engine, prompt, forced, &controller, from).logits;
  };
  for (const auto& [dtype, rope_in_cache] : {std::pair{GpuDtype::Fp16, false}, std::pair{GpuDtype::Fp16, true},
                                             std::pair{GpuDtype::Bf16, false}, std::pair{GpuDtype::Fp32, false}}) {
    SCOPED_TRACE(std::string(gpu_dtype_name(dtype)) + (rope_in_cache ? ", rope_in_cache" : ""));
    const EngineOptions o = on(Device::Cuda, rope_in_cache, dtype);
    Engine fresh(model, o), shared(model, o);
    const std::vector<float> want = run(fresh, nullptr);
    shared.prefill(prompt);
    const std::shared_ptr<const PrefillSnapshot> snap = shared.snapshot_prefill();
    ASSERT_TRUE(snap);
    EXPECT_EQ(run(shared, snap.get()).size(), want.size());  // rows grow past 256, entries evicted
    const std::vector<float> got = run(shared, snap.get());
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-6f) << "logit " << i;
    EXPECT_EQ(shared.peak_kv_bytes(), fresh.peak_kv_bytes());
    EXPECT_EQ(shared.kv_bytes(), fresh.kv_bytes());
  }
}

// Two GPU engines prefill an 8-token prompt; the second runs `fail` (each of its feeds must throw)
// with `controller` attached, then, after `undo`, must hold the prompt alone in every layer and
// decode what the first does.
void expect_failed_feeds_leave_the_prompt(const Model& model, CacheController& controller,
                                          const std::function<void(Engine&)>& fail,
                                          const std::function<void(Engine&)>& undo = {}) {
  const std::vector<int> prompt = {1, 5, 9, 2, 7, 3, 8, 4};
  Engine fresh(model, on(Device::Cuda)), e(model, on(Device::Cuda));
  fresh.prefill(prompt);
  const std::span<const float> f = fresh.decode(6);
  const std::vector<float> want(f.begin(), f.end());
  e.prefill(prompt);
  e.set_controller(&controller);
  fail(e);
  e.set_controller(nullptr);
  EXPECT_EQ(e.pos(), 8);
  for (int l = 0; l < model.config.n_layers; ++l)
    for (int g = 0; g < model.config.n_kv_heads; ++g) EXPECT_EQ(e.slots().held(l, g).size(), 8u);
  if (undo) undo(e);
  const std::span<const float> got = e.decode(6);
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6f) << "logit " << i;
}

// A hook that throws in a decode or an extend on the GPU leaves the cache as before the step:
// the next decode computes what a fresh engine's does.
TEST(EngineCuda, AHookThatThrowsLeavesTheStepUnfed) {
  SKIP_WITHOUT_GPU();
  class FailsAtLayer1 : public CacheController {
   public:
    void after_prefill(int, KvSlots&) override {}
    void before_attention(int layer, int, KvSlots&) override {
      if (layer == 1) throw std::runtime_error("policy failed");
    }
    void after_attention(int, int, std::span<const AttentionBlock>, KvSlots&) override {}
  } fails;
  expect_failed_feeds_leave_the_prompt(tiny::random_model(tiny::tiny_config(), 29), fails, [](Engine& e) {
    EXPECT_THROW(e.decode(6), std::runtime_error);
    EXPECT_THROW(e.extend(std::vector<int>{6, 7}), std::runtime_error);
  });
}

// Engine::extend on the GPU (a batched pass too) gives observers what the CPU's batched pass
// gives: the chunk's rows over the same keys (some skipped), then the last token's logits only.
void check_extend(const Model& model) {
  const std::vector<int> prompt = {1, 5, 9, 2, 7, 3, 8, 4}, chunk = {3, 1, 4, 1, 5, 9, 2, 6};
  auto run = [&](const Model& m, EngineOptions o) {
    tiny::Capture cap;
    Engine engine(m, o);
    engine.prefill(prompt);
    SkipPositions skip(2, 6);  // the middle of the prompt, as KVzip's scoring skips the context
    engine.set_observer(&cap);
    engine.set_controller(&skip);
    engine.extend(chunk);
    engine.set_observer(nullptr);
    engine.set_controller(nullptr);
    return cap;
  };
  const tiny::Capture cpu = run(as_stored(model), cpu_as_gpu()), gpu = run(model, on(Device::Cuda));
  expect_same_rows(cpu, gpu, kSameNumbersTol);
  EXPECT_EQ(gpu.logits_pos, std::vector<int>{15});
  ASSERT_EQ(gpu.logits.size(), 1u);
  for (std::size_t i = 0; i < gpu.logits[0].size(); ++i) EXPECT_NEAR(gpu.logits[0][i], cpu.logits[0][i], 2e-2f);
  // fp32 storage: the plain CPU engine's rows and logits, to accumulation order.
  const tiny::Capture plain = run(model, on(Device::Cpu));
  const tiny::Capture exact = run(model, on(Device::Cuda, false, GpuDtype::Fp32));
  expect_same_rows(plain, exact, kFp32StorageTol);
  ASSERT_EQ(exact.logits.size(), 1u);
  for (std::size_t i = 0; i < exact.logits[0].size(); ++i) EXPECT_NEAR(exact.logits[0][i], plain.logits[0][i], 1e-4f);
}

// On a Llama model, on Gemma 3's local and global layers, Gemma 2's soft-capped ones and OLMo 2's.
TEST(EngineCuda, ExtendGivesTheCpusRowsAndLastLogits) {
  SKIP_WITHOUT_GPU();
  check_extend(tiny::random_model(tiny::tiny_config(), 23));
  check_extend(tiny::random_model(tiny::gemma3_config(), 24));
  check_extend(tiny::random_model(tiny::gemma2_config(), 25));
  check_extend(tiny::random_model(tiny::olmo2_config(), 26));
}

// Marks per KV head and layer before each attention: position p inactive when (p + g + layer) % 3
// is 0, but never the newest entry, so that every query keeps a key; the chunk's own keys too.
class PerHeadMarks : public CacheController {
 public:
  void after_prefill(int, KvSlots&) override {}
  void before_attention(int layer, int, KvSlots& kv) override {
    for (int g = 0; g < kv.n_kv_heads(); ++g) {
      const auto held = kv.held(layer, g);
      const auto active = kv.active(layer, g);
      for (std::size_t i = 0; i + 1 < held.size(); ++i) active[i] = (held[i] + g + layer) % 3 != 0;
    }
  }
  void after_attention(int, int, std::span<const AttentionBlock>, KvSlots&) override {}
};

// The batched extend over a cache that is not one run of positions: a sliding window, entries
// evicted after the prompt (sink + recent kept), and per-head marks that skip some of the chunk's
// own keys. Every row over the same keys as the CPU's batched pass, and the last logits; also
// with blocks of 3 query rows, so that prefill and extend each take several blocks.
TEST(EngineCuda, ExtendOverWindowEvictionAndPerHeadMarksMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  ModelConfig c = tiny::tiny_config();  // GQA
  c.sliding_window = 9;
  const Model model = tiny::random_model(c, 29);
  const std::vector<int> prompt = {1, 5, 9, 2, 7, 3, 8, 4, 6, 10, 12, 14}, chunk = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3};
  auto run = [&](const Model& m, EngineOptions o) {
    tiny::Capture cap;
    Engine engine(m, o);
    SinkWindowController trim(2, 6);
    engine.set_controller(&trim);
    engine.prefill(prompt);
    PerHeadMarks marks;
    engine.set_observer(&cap);
    engine.set_controller(&marks);
    engine.extend(chunk);
    engine.set_observer(nullptr);
    engine.set_controller(nullptr);
    EXPECT_EQ(engine.pos(), 22);
    return cap;
  };
  EngineOptions cpu = cpu_as_gpu();
  cpu.prefill_block = 12;
  EngineOptions gpu_small_blocks = on(Device::Cuda);
  gpu_small_blocks.prefill_block = 3;
  const tiny::Capture want = run(as_stored(model), cpu);
  for (const EngineOptions& o : {on(Device::Cuda), gpu_small_blocks}) {
    const tiny::Capture got = run(model, o);
    ASSERT_FALSE(got.rows.empty());
    expect_same_rows(want, got, kSameNumbersTol);
    ASSERT_EQ(got.logits.size(), 1u);
    for (std::size_t i = 0; i < got.logits[0].size(); ++i) EXPECT_NEAR(got.logits[0][i], want.logits[0][i], 2e-2f);
  }
}

// A controller that leaves the chunk's queries no key in one layer: extend throws what the CPU's
// throws and feeds nothing; with the controller's marks undone, the next decode gives what a
// fresh engine's does.
TEST(EngineCuda, ExtendWithAQueryLeftNothingFeedsNothing) {
  SKIP_WITHOUT_GPU();
  class NothingInLayerOne : public CacheController {
   public:
    void after_prefill(int, KvSlots&) override {}
    void before_attention(int layer, int, KvSlots& kv) override {
      if (layer != 1) return;
      for (int g = 0; g < kv.n_kv_heads(); ++g) {
        const auto active = kv.active(layer, g);
        std::fill(active.begin(), active.end(), uint8_t{0});
      }
    }
    void after_attention(int, int, std::span<const AttentionBlock>, KvSlots&) override {}
  } nothing;
  expect_failed_feeds_leave_the_prompt(
      tiny::random_model(tiny::tiny_config(), 31), nothing,
      [](Engine& e) { EXPECT_THROW(e.extend(std::vector<int>{6, 7, 8}), std::logic_error); },
      [](Engine& e) {  // the controller's marks stay: undo them
        for (int l = 0; l < e.model().config.n_layers; ++l) {
          for (int g = 0; g < e.model().config.n_kv_heads; ++g) {
            const auto active = e.slots().active(l, g);
            std::fill(active.begin(), active.end(), uint8_t{1});
          }
        }
      });
}

// The same GPU computation twice: once sending every prefill row to the host (a fan-out with an
// observer that wants rows), once reducing on the device (the reducer alone wants none).
TEST(EngineCuda, DeviceReductionsEqualTheRowsReducedOnTheHost) {
  SKIP_WITHOUT_GPU();
  if (!std::filesystem::exists(kModels + "stories260K.bin")) GTEST_SKIP() << "stories260K.bin not found";
  const Model model = load_model(kModels + "stories260K.bin");
  std::vector<int> prompt = kPromptIds;
  for (int i = 0; i < 300; ++i) prompt.push_back(260 + (i * 37) % 200);
  const ModelShape shape{model.config.n_layers, model.config.n_heads, model.config.n_kv_heads, model.config.head_dim};
  PrefillReducer from_rows(shape, 64, 16), on_device(shape, 64, 16);  // pooled in 16 x 16 cells
  tiny::Capture rows;
  ObserverFanout both;
  both.add(&from_rows);
  both.add(&rows);
  ASSERT_TRUE(both.prefill_need().rows);
  ASSERT_FALSE(on_device.prefill_need().rows);
  Engine a(model, on(Device::Cuda));
  a.set_observer(&both);
  a.prefill(prompt);
  Engine b(model, on(Device::Cuda));
  b.set_observer(&on_device);
  b.prefill(prompt);
  EXPECT_FALSE(rows.rows.empty());
  const PrefillEvidence &x = from_rows.evidence(), &y = on_device.evidence();
  ASSERT_EQ(x.colsum.size(), y.colsum.size());
  ASSERT_EQ(x.window_rows.size(), y.window_rows.size());
  for (std::size_t i = 0; i < x.colsum.size(); ++i) EXPECT_NEAR(x.colsum[i], y.colsum[i], 1e-4) << i;
  EXPECT_EQ(x.window_rows, y.window_rows);
  EXPECT_EQ(x.window_lse, y.window_lse);
  ASSERT_EQ(y.pool_block, 16);
  ASSERT_EQ(x.pooled.size(), y.pooled.size());
  for (std::size_t i = 0; i < x.pooled.size(); ++i) EXPECT_NEAR(x.pooled[i], y.pooled[i], 1e-5) << i;
}

TEST(EngineCuda, OutOfGpuMemoryNamesTheBytesAndTheCpuStillRuns) {
  SKIP_WITHOUT_GPU();
  ModelConfig c = tiny::tiny_config();
  // RoPE tables of 1G positions x 64 frequencies: 256 GB each, more than any GPU holds, asked
  // for on the device before anything of that size is built on the host (the cache itself only
  // grows with the sequence, so a long context alone allocates nothing up front).
  c.head_dim = 128;
  c.dim = c.n_heads * c.head_dim;
  c.seq_len = 1 << 30;
  const Model model = tiny::random_model(c, 3);
  try {
    Engine engine(model, on(Device::Cuda));
    FAIL() << "a cache of " << c.seq_len << " positions fit on the GPU";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("out of GPU memory"), std::string::npos) << msg;
    EXPECT_NE(msg.find("bytes free"), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
  try {  // in fp32, the way to half the weights' bytes is named
    Engine engine(model, on(Device::Cuda, false, GpuDtype::Fp32));
    FAIL() << "a cache of " << c.seq_len << " positions fit on the GPU";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("bytes free; weights stored in fp32 (--gpu-dtype fp16 takes half)"), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
  Engine cpu(model, on(Device::Cpu));
  EXPECT_EQ(cpu.prefill(std::vector<int>{1, 2, 3}).size(), static_cast<std::size_t>(c.vocab_size));
}

}  // namespace
}  // namespace kvs::cuda_test
