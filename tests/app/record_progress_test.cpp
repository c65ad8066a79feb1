// record_trace's prefill progress (RecordCallbacks::on_prefill_layer), which `kvscope record` and
// the Run view show while a long prompt is processed: every layer once, in order, then the end,
// with the full cache and under a policy enforced live.
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

TEST(RecordProgress, ReportsEveryPrefillLayerInOrderThenTheEnd) {
  const fs::path dir = fs::path(KVSCOPE_SHARED_DIR) / "models" / "stories260K";
  if (!fs::exists(dir / "stories260K.bin")) GTEST_SKIP() << "stories260K model files absent";
  const int n_layers = load_model((dir / "stories260K.bin").string()).config.n_layers;
  std::vector<std::pair<int, int>> want;  // (layer, n_layers) for every layer, then (n, n)
  for (int l = 0; l <= n_layers; ++l) want.emplace_back(l, n_layers);

  for (const std::string policy : {"", "streamingllm"}) {
    SCOPED_TRACE(policy.empty() ? "full cache" : policy);
    const fs::path out = fs::temp_directory_path() / ("kvs_progress_" + std::to_string(::getpid()) + ".h5");
    RecordRequest req;
    req.model_path = (dir / "stories260K.bin").string();
    req.tokenizer_path = (dir / "tok512.bin").string();
    req.prompt = "Once upon a time";
    req.steps = 8;
    req.out_path = out.string();
    req.policy = policy;
    req.budget = 16;
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

}  // namespace
}  // namespace kvs
