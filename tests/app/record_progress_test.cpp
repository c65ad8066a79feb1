// record_trace's prefill progress (RecordCallbacks::on_prefill_layer), which `kvscope record` and
// the Run view show while a long prompt is processed: every layer once, in order, then the end,
// with the full cache and under a policy enforced live; and stopping during the prefill, which
// ends the recording at the next layer and leaves no file behind.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "app/cli/record.h"
#include "inference/loader.h"

namespace kvs {
namespace {

namespace fs = std::filesystem;

const fs::path kStories = fs::path(KVSCOPE_SHARED_DIR) / "models" / "stories260K";

RecordRequest stories_request(const fs::path& out, const std::string& policy) {
  RecordRequest req;
  req.model_path = (kStories / "stories260K.bin").string();
  req.tokenizer_path = (kStories / "tok512.bin").string();
  req.prompt = "Once upon a time";
  req.steps = 8;
  req.out_path = out.string();
  req.policy = policy;
  req.budget = 16;
  return req;
}

TEST(RecordProgress, ReportsEveryPrefillLayerInOrderThenTheEnd) {
  if (!fs::exists(kStories / "stories260K.bin")) GTEST_SKIP() << "stories260K model files absent";
  const int n_layers = load_model((kStories / "stories260K.bin").string()).config.n_layers;
  std::vector<std::pair<int, int>> want;  // (layer, n_layers) for every layer, then (n, n)
  for (int l = 0; l <= n_layers; ++l) want.emplace_back(l, n_layers);

  for (const std::string policy : {"", "streamingllm"}) {
    SCOPED_TRACE(policy.empty() ? "full cache" : policy);
    const fs::path out = fs::temp_directory_path() / ("kvs_progress_" + std::to_string(::getpid()) + ".h5");
    const RecordRequest req = stories_request(out, policy);
    std::vector<std::pair<int, int>> seen;
    int tokens = 0;
    RecordCallbacks cb;
    cb.on_prefill_layer = [&](int layer, int n) {
      EXPECT_EQ(tokens, 0) << "prefill progress after a generated token";
      seen.emplace_back(layer, n);
    };
    cb.on_token = [&](int, int, const std::string&) { ++tokens; };
    record_trace(req, cb);
    fs::remove(out);
    EXPECT_EQ(seen, want);
    EXPECT_EQ(tokens, 8);
  }
}

TEST(RecordProgress, StoppingDuringThePrefillEndsAtTheNextLayerAndWritesNothing) {
  if (!fs::exists(kStories / "stories260K.bin")) GTEST_SKIP() << "stories260K model files absent";
  for (const std::string policy : {"", "streamingllm"}) {
    SCOPED_TRACE(policy.empty() ? "full cache" : policy);
    const fs::path dir = fs::temp_directory_path() / ("kvs_progress_stop_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    std::vector<int> layers;
    bool stop = false;
    int tokens = 0;
    RecordCallbacks cb;
    cb.on_prefill_layer = [&](int layer, int) {
      layers.push_back(layer);
      stop = layer == 1;  // the user stops while layer 1 runs
    };
    cb.cancelled = [&] { return stop; };
    cb.on_token = [&](int, int, const std::string&) { ++tokens; };
    const RecordResult r = record_trace(stories_request(dir / "t.h5", policy), cb);
    EXPECT_EQ(layers, (std::vector<int>{0, 1}));
    EXPECT_EQ(tokens, 0);
    EXPECT_TRUE(r.out_path.empty());
    EXPECT_EQ(r.n_steps, 0);
    EXPECT_NE(r.note.find("no trace written"), std::string::npos) << r.note;
    EXPECT_TRUE(fs::is_empty(dir)) << "the trace or its temporary file was left behind";
    fs::remove_all(dir);
  }
}

}  // namespace
}  // namespace kvs
