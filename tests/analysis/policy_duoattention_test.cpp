// DuoAttention: pattern folders in the published format (the writer replacing only a pattern it
// wrote), the quantile and threshold rules, streaming heads' sink + recent, profiled gates,
// malformed TSV, a prompt fed in chunks.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <system_error>
#include <vector>
#include <unistd.h>

#include "analysis/head_stats.h"
#include "analysis/duo_pattern.h"
#include "analysis/policy_duoattention.h"
#include "analysis/position_slots.h"
#include "inference/errors.h"
#include "sim_fixture.h"

using namespace kvs;
using namespace kvs::test;
namespace fs = std::filesystem;

// A fresh folder under the temporary directory, removed (whatever its permissions) when the
// test program exits.
static fs::path temp_dir(const std::string& name) {
  static struct Created {
    std::vector<fs::path> dirs;
    ~Created() {
      for (const fs::path& d : dirs) {
        std::error_code ec;
        fs::permissions(d, fs::perms::owner_all, ec);
        fs::remove_all(d, ec);
      }
    }
  } created;
  fs::path d = fs::temp_directory_path() / ("kvs_duo_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  created.dirs.push_back(d);
  return d;
}

static void write_file(const fs::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary);
  f << text;
}

// 3 layers x 2 KV heads in the published layout (numpy savetxt '%.18e', tab, no header).
static fs::path make_fixture() {
  const fs::path d = temp_dir("fixture") / "lr=0.02-reg=0.05-ctx=1000_32000-multi_passkey10";
  fs::create_directories(d);
  const double a[3][2] = {{8.593750000000000000e-01, 1.0}, {-1.4e-3, 2.5e-01}, {6.0e-01, 1.0e-01}};
  std::string tsv;
  char buf[64];
  for (auto& row : a) {
    std::snprintf(buf, sizeof buf, "%.18e\t%.18e\n", row[0], row[1]);
    tsv += buf;
  }
  write_file(d / "full_attention_heads.tsv", tsv);
  write_file(d / "config.json",
             "{\"model_name\": \"x\", \"lr\": 0.02, \"sink_size\": 128, \"recent_size\": 256, "
             "\"deploy_sink_size\": null, \"threshold\": 0.5, \"sparsity\": null}");
  return d;
}

TEST(DuoPattern, ReadsThePublishedLayout) {
  const fs::path d = make_fixture();
  const DuoPattern p = read_duo_pattern(d.string());
  EXPECT_EQ(p.n_layers, 3);
  EXPECT_EQ(p.n_kv_heads, 2);
  EXPECT_FLOAT_EQ(p.alpha[0], 0.859375f);
  EXPECT_FLOAT_EQ(p.alpha[2], 0.0f);  // -1.4e-3 clipped
  EXPECT_EQ(p.sink_size, 128);
  EXPECT_EQ(p.recent_size, 256);
  // Round trip through the writer.
  const fs::path out = temp_dir("out");
  write_duo_pattern(out.string(), p, "test");
  const DuoPattern q = read_duo_pattern(out.string());
  EXPECT_EQ(q.alpha, p.alpha);
  EXPECT_EQ(q.sink_size, 128);
  std::ifstream t(out / "full_attention_heads.tsv");
  std::string line;
  std::getline(t, line);
  EXPECT_EQ(line, "8.593750000000000000e-01\t1.000000000000000000e+00");
}

// What InputError `f` throws ("" for none).
template <class F>
static std::string input_error_of(F f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

static std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// A model folder's config.json, a published pattern, gates without KVScope's config.json beside
// them, or a folder that is a file are left as they were; KVScope's own pattern is replaced whole.
// A pattern folder to be created inside a folder without its owner's write bit is refused (root
// too, on the mode bits), and nothing is created: as every output's rule (output_target).
TEST(DuoPattern, NewFolderInAReadOnlyFolderIsRefused) {
  DuoPattern p;
  p.n_layers = 1;
  p.n_kv_heads = 1;
  p.alpha = {0.5f};
  const fs::path ro = temp_dir("read_only");
  fs::permissions(ro, fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read | fs::perms::group_exec);
  const fs::path dir = ro / "pattern" / "deeper";
  EXPECT_EQ(input_error_of([&] { write_duo_pattern(dir.string(), p, "test"); }),
            dir.string() + ": is in the read-only folder " + ro.string() +
                " (its owner has no write permission); not writing into it");
  EXPECT_TRUE(fs::is_empty(ro));
}

TEST(DuoPattern, WriterReplacesOnlyAPatternItWrote) {
  DuoPattern p;
  p.n_layers = 1;
  p.n_kv_heads = 2;
  p.alpha = {0.25f, 0.75f};
  const std::string refusal =
      "is not part of a DuoAttention pattern KVScope wrote; not replacing it (choose another folder)";
  const fs::path model = temp_dir("hf_model");
  write_file(model / "config.json", "{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 64}");
  const fs::path published = make_fixture();
  const std::string published_tsv = read_file(published / "full_attention_heads.tsv");
  const fs::path gates_only = temp_dir("gates_only");
  write_file(gates_only / "full_attention_heads.tsv", "0.5\t0.5\n");
  const fs::path bad_gates = temp_dir("bad_gates");
  write_file(bad_gates / "config.json", "{\"sink_size\": 4, \"recent_size\": 32, \"alpha_source\": \"test\"}");
  write_file(bad_gates / "full_attention_heads.tsv", "model weights, not gates");
  const std::vector<std::pair<fs::path, std::string>> refused = {
      {model, (model / "config.json").string() + ": " + refusal},
      {published, (published / "config.json").string() + ": " + refusal},
      {gates_only, (gates_only / "full_attention_heads.tsv").string() + ": " + refusal},
      {bad_gates, (bad_gates / "full_attention_heads.tsv").string() + ": " + refusal}};
  for (const auto& refusal_case : refused) {
    const fs::path& dir = refusal_case.first;  // named, not bound: clang 14's lambdas cannot capture a binding
    const std::string& message = refusal_case.second;
    std::map<std::string, std::string> before;
    for (const auto& e : fs::directory_iterator(dir)) before[e.path().filename()] = read_file(e.path());
    EXPECT_EQ(input_error_of([&] { write_duo_pattern(dir.string(), p, "test"); }), message);
    std::map<std::string, std::string> after;
    for (const auto& e : fs::directory_iterator(dir)) after[e.path().filename()] = read_file(e.path());
    EXPECT_EQ(after, before) << dir;
  }
  EXPECT_EQ(read_file(published / "full_attention_heads.tsv"), published_tsv);
  const fs::path file = temp_dir("file") / "pattern";
  write_file(file, "notes");
  EXPECT_EQ(input_error_of([&] { write_duo_pattern(file.string(), p, "test"); }),
            file.string() + ": exists and is not a folder; not writing a DuoAttention pattern into it");
  EXPECT_EQ(read_file(file), "notes");

  const fs::path own = temp_dir("own");
  write_duo_pattern(own.string(), p, "first");
  p.alpha = {1.0f, 0.5f};
  write_duo_pattern(own.string(), p, "second \"quoted\"");
  EXPECT_EQ(read_duo_pattern(own.string()).alpha, p.alpha);
  EXPECT_NE(read_file(own / "config.json").find("\"alpha_source\":\"second \\\"quoted\\\"\""), std::string::npos)
      << read_file(own / "config.json");
  int entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(own)) ++entries;
  EXPECT_EQ(entries, 2) << "config.json and full_attention_heads.tsv, no temporary file";
}

TEST(DuoPattern, MalformedTsvIsAnInputError) {
  EXPECT_THROW(parse_duo_tsv("0.5\t0.5\n0.5\n", "x.tsv"), InputError);     // ragged
  EXPECT_THROW(parse_duo_tsv("0.5\tabc\n", "x.tsv"), InputError);          // non-number
  EXPECT_THROW(parse_duo_tsv("", "x.tsv"), InputError);                    // empty
  EXPECT_THROW(parse_duo_tsv("0.5\t\n", "x.tsv"), InputError);             // empty field
  const fs::path d = make_fixture();
  // Wrong shape for the model: 3 x 2 gates, model 4 layers.
  EXPECT_THROW(policy("duoattention:pattern=" + d.string(), 16, shape_of(4, 4, 2)), InputError);
  EXPECT_THROW(policy("duoattention:pattern=/nonexistent/dir", 16, shape_of(3, 4, 2)), InputError);
}

TEST(DuoAttention, QuantileRuleMarksExactlyTheExpectedHeads) {
  // Gates 0.859375, 1, 0, 0.25, 0.6, 0.1: sparsity 0.5 -> the top three are retrieval heads.
  const std::vector<float> a = {0.859375f, 1.0f, 0.0f, 0.25f, 0.6f, 0.1f};
  EXPECT_EQ(duo_retrieval_by_sparsity(a, 0.5), (std::vector<uint8_t>{1, 1, 0, 0, 1, 0}));
  EXPECT_EQ(duo_retrieval_by_sparsity(a, 0.75), (std::vector<uint8_t>{1, 1, 0, 0, 0, 0}));
  EXPECT_EQ(duo_retrieval_by_sparsity(a, 0.0), std::vector<uint8_t>(6, 1));
  EXPECT_EQ(duo_retrieval_by_sparsity(a, 1.0), std::vector<uint8_t>(6, 0));
  // Ties (many gates exactly 1.0) are broken by the noise: still exactly half.
  const std::vector<float> ones(8, 1.0f);
  int n = 0;
  for (uint8_t r : duo_retrieval_by_sparsity(ones, 0.5)) n += r;
  EXPECT_EQ(n, 4);
  EXPECT_EQ(duo_retrieval_by_threshold(a, 0.5), (std::vector<uint8_t>{1, 1, 0, 0, 1, 0}));
}

TEST(DuoAttention, RetrievalHeadsKeepAllStreamingHeadsSinkPlusRecent) {
  const fs::path d = make_fixture();
  const ModelShape shape = shape_of(3, 4, 2);
  const SimInput in = random_input(shape, 20, 3, 4, 51);
  auto p = policy("duoattention:sink=2,pattern=" + d.string(), 6, shape);
  const RunData r = run_one(in, *p);
  const std::vector<uint8_t> retrieval = {1, 1, 0, 0, 1, 0};
  for (int s = 0; s < 3; ++s) {
    const int q = 20 + s;
    for (int l = 0; l < 3; ++l)
      for (int g = 0; g < 2; ++g) {
        if (retrieval[l * 2 + g]) {
          EXPECT_EQ(kept_at(r, in, s, l, g), range(0, q + 1));
        } else {
          EXPECT_EQ(kept_at(r, in, s, l, g), (std::vector<int>{0, 1, q - 4, q - 3, q - 2, q - 1, q}));
        }
      }
  }
  EXPECT_NE(r.params_json.find("\"retrieval_heads\":3"), std::string::npos) << r.params_json;
}

TEST(DuoAttention, ProfiledGatesFromTheTrace) {
  const ModelShape shape = shape_of(2, 4, 2);
  SimInput in = random_input(shape, 30, 4, 4, 52);
  // Layer 1, KV head 0 (query heads 0-1) puts all its mass mid-context.
  for (int s = 0; s < 4; ++s)
    for (int h = 0; h < 2; ++h) {
      float* row = in.rows.data() + (((size_t)s * 2 + 1) * 4 + h) * in.total_len;
      std::fill(row, row + in.total_len, 0.0f);
      row[10] = 1.0f;
    }
  AlphaAccumulator acc(shape, 4, 8);
  std::vector<float> rows(in.rows.begin(), in.rows.begin() + 2 * 4 * in.total_len);
  acc.add_step(rows, in.total_len, 30);
  EXPECT_FLOAT_EQ(acc.alpha()[2], 1.0f);
  auto p = policy("duoattention:sparsity=0.75,sink=4", 12, shape);
  const RunData r = run_one(in, *p);
  EXPECT_NE(r.params_json.find("profiled from trace"), std::string::npos);
  // Exactly one retrieval head (sparsity 0.75 of 4): layer 1, KV head 0 keeps everything.
  EXPECT_EQ(kept_at(r, in, 3, 1, 0), range(0, 34));
  EXPECT_EQ(kept_at(r, in, 3, 0, 0).size(), 13u);
}

TEST(DuoAttention, BudgetCoveringContextKeepsEverything) {
  const ModelShape shape = shape_of(2, 4, 2);
  const SimInput in = random_input(shape, 10, 4, 4, 53);
  auto p = policy("duoattention", 14, shape);
  const RunData r = run_one(in, *p);
  for (int s = 0; s < 4; ++s) EXPECT_EQ(kept_at(r, in, s, 1, 1), range(0, 11 + s));
}

// The official deployments' sparsities: 0.5 with GQA, 0.75 when every query head has its own KV head.
TEST(DuoAttention, DefaultSparsityFollowsTheAttentionKind) {
  EXPECT_NE(policy("duoattention", 8, shape_of(2, 4, 2))->params_json().find("\"sparsity\":0.5"), std::string::npos);
  EXPECT_NE(policy("duoattention", 8, shape_of(2, 4, 4))->params_json().find("\"sparsity\":0.75"), std::string::npos);
  EXPECT_NE(policy("duoattention:sparsity=0.25", 8, shape_of(2, 4, 4))->params_json().find("\"sparsity\":0.25"),
            std::string::npos);
}

TEST(DuoAttention, GatesHandedByTheCallerAndTheirShape) {
  const ModelShape shape = shape_of(2, 4, 2);
  const SimInput in = random_input(shape, 20, 2, 4, 54);
  SimulateOptions opt;
  opt.alpha = {0.9f, 0.1f, 0.2f, 0.3f};  // sparsity 0.75 -> only (layer 0, KV head 0) retrieves
  opt.alpha_source = "test gates";
  auto p = policy("duoattention:sparsity=0.75,gates=estimated", 8, shape);
  const RunData r = run_one(in, *p, opt);
  EXPECT_NE(r.params_json.find("\"alpha_source\":\"test gates\""), std::string::npos);
  EXPECT_EQ(kept_at(r, in, 1, 0, 0), range(0, 22));
  EXPECT_EQ(kept_at(r, in, 1, 0, 1).size(), 9u);
  opt.alpha.pop_back();  // gates for another head count
  EXPECT_THROW(run_one(in, *p, opt), InputError);
}

// The held positions of (layer 0, kv_head).
static std::vector<int> held_of(const PositionSlots& kv, int g) {
  const std::span<const int32_t> h = kv.held(0, g);
  return {h.begin(), h.end()};
}

// A 20-token prompt fed in chunks of 8 (as a live run feeds it): a streaming head is trimmed to
// sink + recent after the first chunk, then at each later chunk's first position (the slots
// before the chunk; the chunk stays whole while its queries attend) and at the first decode step.
TEST(DuoAttention, APromptFedInChunksIsTrimmedAtEachChunksStart) {
  const ModelShape shape = shape_of(1, 4, 2);
  auto p = policy("duoattention:gates=estimated,sink=2,recent=3,prefill_chunk=8", 5, shape);
  EXPECT_EQ(p->prefill_chunk(), 8);
  PolicyContext ctx;
  ctx.shape = shape;
  ctx.prompt_len = 20;
  ctx.alpha = {0.9f, 0.1f};  // sparsity 0.5: KV head 0 retrieves, KV head 1 streams
  p->begin(ctx);
  PositionSlots kv(1, 2);
  kv.fill_prompt(8);
  p->after_prefill(8, kv);
  EXPECT_EQ(held_of(kv, 1), (std::vector<int>{0, 1, 5, 6, 7}));
  auto feed = [&](int from, int to) {  // positions [from, to) appended, then asked at each
    for (int q = from; q < to; ++q)
      for (int g = 0; g < 2; ++g) kv.append(0, g, q);
    for (int q = from; q < to; ++q) p->before_attention(0, q, kv);  // once (batched) or a step each
  };
  feed(8, 16);
  EXPECT_EQ(held_of(kv, 1), (std::vector<int>{0, 1, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}));
  feed(16, 20);
  EXPECT_EQ(held_of(kv, 1), (std::vector<int>{0, 1, 13, 14, 15, 16, 17, 18, 19}));
  feed(20, 21);  // the first decode step: the prompt's last chunk trimmed before it attends
  EXPECT_EQ(held_of(kv, 1), (std::vector<int>{0, 1, 17, 18, 19, 20}));
  p->after_attention(0, 20, {}, kv);
  EXPECT_EQ(held_of(kv, 1), (std::vector<int>{0, 1, 18, 19, 20}));
  EXPECT_EQ(held_of(kv, 0), range(0, 21));
  EXPECT_NE(p->params_json().find("\"prefill_chunk\":8"), std::string::npos) << p->params_json();
  EXPECT_NE(p->caveat(20).find("in 3 chunks"), std::string::npos) << p->caveat(20);
  EXPECT_EQ(p->caveat(8), "");
  EXPECT_THROW(policy("duoattention:prefill_chunk=-1", 5, shape), InputError);
}

// The trace driver replays one whole prefill: prefill_chunk leaves a simulated run's kept sets as
// they are.
TEST(DuoAttention, ASimulatedRunKeepsTheSameSetsWithPrefillChunks) {
  const ModelShape shape = shape_of(2, 4, 2);
  const SimInput in = random_input(shape, 20, 4, 4, 55);
  SimulateOptions opt;
  opt.alpha = {0.9f, 0.1f, 0.2f, 0.8f};
  const RunData whole = run_one(in, *policy("duoattention:gates=estimated,sink=2", 6, shape), opt);
  const RunData chunked = run_one(in, *policy("duoattention:gates=estimated,sink=2,prefill_chunk=6", 6, shape), opt);
  EXPECT_EQ(chunked.kept, whole.kept);
}
