// record_trace's prefill progress (RecordCallbacks::on_prefill_layer), which `kvscope record` and
// the Run view show while a long prompt is processed: every layer once, in order, then the end,
// with the full cache; under a policy enforced live, the full-cache reference run reports its own
// layers and steps first and the policy run, which starts from that prefill, the prompt through
// at once; and stopping during the prefill or the reference run, which ends the recording at the
// next layer or step and leaves no file behind. Also rerun_trace's progress over its runs, and
// stopping it, which leaves the trace as it was.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "app/cli/record.h"
#include "app/cli/rerun.h"
#include "inference/errors.h"
#include "inference/loader.h"
#include "tests/test_paths.h"

namespace kvs {
namespace {

namespace fs = std::filesystem;

const fs::path kStories = fs::path(test::shared_path("models/stories260K"));

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
  const std::vector<std::pair<int, int>> through = {{n_layers, n_layers}};  // the prompt restored

  for (const std::string policy : {"", "streamingllm"}) {
    SCOPED_TRACE(policy.empty() ? "full cache" : policy);
    const fs::path out = fs::temp_directory_path() / ("kvs_progress_" + std::to_string(::getpid()) + ".h5");
    const RecordRequest req = stories_request(out, policy);
    std::vector<std::pair<int, int>> seen, reference_layers;
    int tokens = 0, reference_steps = 0;
    RecordCallbacks cb;
    cb.on_prefill_layer = [&](int layer, int n) {
      EXPECT_EQ(tokens, 0) << "prefill progress after a generated token";
      EXPECT_EQ(reference_steps, policy.empty() ? 0 : 8) << "the policy run's prefill before the reference's end";
      seen.emplace_back(layer, n);
    };
    cb.on_pass = [&](const PassProgress& p) {
      EXPECT_EQ(p.pass, "reference run");
      EXPECT_EQ(p.index, 0);
      EXPECT_EQ(p.count, 2);  // the recorded run is the second
      if (!p.decode) {
        reference_layers.emplace_back(p.done, p.total);
        return;
      }
      EXPECT_EQ(p.done, ++reference_steps);
      EXPECT_EQ(p.total, 8);
    };
    cb.on_token = [&](int, int, const std::string&) { ++tokens; };
    record_trace(req, cb);
    fs::remove(out);
    EXPECT_EQ(seen, policy.empty() ? want : through);
    EXPECT_EQ(tokens, 8);
    // Only a recording under a policy runs the full-cache reference first.
    const std::vector<std::pair<int, int>> none;
    EXPECT_EQ(reference_layers, policy.empty() ? none : want);
    EXPECT_EQ(reference_steps, policy.empty() ? 0 : 8);
  }
}

// The full cache's recording; under a policy the prompt is the reference run's to process, and the
// next test stops that.
TEST(RecordProgress, StoppingDuringThePrefillEndsAtTheNextLayerAndWritesNothing) {
  if (!fs::exists(kStories / "stories260K.bin")) GTEST_SKIP() << "stories260K model files absent";
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
  const RecordResult r = record_trace(stories_request(dir / "t.h5", ""), cb);
  EXPECT_EQ(layers, (std::vector<int>{0, 1}));
  EXPECT_EQ(tokens, 0);
  EXPECT_TRUE(r.out_path.empty());
  EXPECT_EQ(r.n_steps, 0);
  EXPECT_EQ(r.cancelled_during, "prefill");
  EXPECT_NE(r.note.find("no trace written"), std::string::npos) << r.note;
  EXPECT_TRUE(fs::is_empty(dir)) << "the trace or its temporary file was left behind";
  fs::remove_all(dir);
}

TEST(RecordProgress, StoppingDuringThePolicyRecordingsReferenceRunWritesNothing) {
  if (!fs::exists(kStories / "stories260K.bin")) GTEST_SKIP() << "stories260K model files absent";
  for (const bool in_prefill : {true, false}) {
    SCOPED_TRACE(in_prefill ? "in its prefill" : "in its decode");
    const fs::path dir = fs::temp_directory_path() / ("kvs_progress_ref_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    bool stop = false;
    int policy_layers = 0, reference_steps = 0, tokens = 0;
    RecordCallbacks cb;
    cb.on_pass = [&](const PassProgress& p) {
      if (p.decode) ++reference_steps;
      stop = stop || (in_prefill ? !p.decode && p.done == 1 : reference_steps == 3);
    };
    cb.on_prefill_layer = [&](int, int) { ++policy_layers; };
    cb.on_token = [&](int, int, const std::string&) { ++tokens; };
    cb.cancelled = [&] { return stop; };
    const RecordResult r = record_trace(stories_request(dir / "t.h5", "streamingllm"), cb);
    EXPECT_EQ(policy_layers, 0) << "the policy run started after the stop";
    EXPECT_EQ(tokens, 0);
    EXPECT_TRUE(r.out_path.empty());
    EXPECT_EQ(r.cancelled_during, "reference run");
    EXPECT_EQ(reference_steps, in_prefill ? 0 : 3);
    EXPECT_NE(r.note.find("no trace written"), std::string::npos) << r.note;
    EXPECT_TRUE(fs::is_empty(dir)) << "the trace or its temporary file was left behind";
    fs::remove_all(dir);
  }
}

// A stories260K trace of 8 steps to re-run policies on.
fs::path recorded_trace(const fs::path& dir) {
  fs::create_directories(dir);
  const fs::path out = dir / "t.h5";
  record_trace(stories_request(out, ""));
  return out;
}

std::string file_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(RerunProgress, ReportsEachRunsLayersThenStepsInTurn) {
  if (!fs::exists(kStories / "stories260K.bin")) GTEST_SKIP() << "stories260K model files absent";
  const fs::path dir = fs::temp_directory_path() / ("kvs_rerun_progress_" + std::to_string(::getpid()));
  const fs::path trace = recorded_trace(dir);
  const int L = load_model((kStories / "stories260K.bin").string()).config.n_layers;
  std::vector<PassProgress> seen;
  RerunCallbacks cb;
  cb.on_progress = [&](const PassProgress& p) { seen.push_back(p); };
  rerun_trace({trace.string(), "--policy", "h2o", "--policy", "streamingllm", "--budget", "16", "--threads", "1"}, cb);
  // The reference run: layers 0..L-1 begun, the prompt through (L of L), then steps 1..8 of 8.
  // Each policy run starts from the reference's prefill: the prompt through at once, then its steps.
  const std::vector<std::string> names = {"reference run", "h2o_b16", "streamingllm_b16"};
  ASSERT_EQ(seen.size(), (L + 1 + 8) + 2 * (1 + 8));
  size_t i = 0;
  for (int run = 0; run < 3; ++run) {
    for (int k = run == 0 ? 0 : L; k < L + 1 + 8; ++k, ++i) {
      const PassProgress& p = seen[i];
      SCOPED_TRACE("report " + std::to_string(i));
      EXPECT_EQ(p.pass, names[run]);
      EXPECT_EQ(p.index, run);
      EXPECT_EQ(p.count, 3);
      EXPECT_EQ(p.decode, k > L);
      EXPECT_EQ(p.done, k <= L ? k : k - L);
      EXPECT_EQ(p.total, k <= L ? L : 8);
    }
  }
  fs::remove_all(dir);
}

TEST(RerunProgress, StoppingInAPolicyRunAppendsNothing) {
  if (!fs::exists(kStories / "stories260K.bin")) GTEST_SKIP() << "stories260K model files absent";
  const fs::path dir = fs::temp_directory_path() / ("kvs_rerun_stop_" + std::to_string(::getpid()));
  const fs::path trace = recorded_trace(dir);
  const std::string before = file_bytes(trace);
  bool stop = false;
  int last_index = -1;
  RerunCallbacks cb;
  cb.on_progress = [&](const PassProgress& p) {
    last_index = p.index;
    stop = stop || (p.index == 1 && p.decode && p.done == 1);  // after the policy run's first step
  };
  cb.cancelled = [&] { return stop; };
  try {
    rerun_trace({trace.string(), "--policy", "h2o", "--budget", "16", "--threads", "1"}, cb);
    ADD_FAILURE() << "the stopped re-run returned";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("cancelled; nothing appended"), std::string::npos) << e.what();
  }
  EXPECT_EQ(last_index, 1);
  EXPECT_EQ(file_bytes(trace), before) << "the trace changed";
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1) << "a file was left beside the trace";
  fs::remove_all(dir);
}

// A kvzip re-run on a trace recorded without its scores runs KVzip's scoring pass after the
// reference run: reported as a pass of its own (the prompt through at once, restored from the
// reference's prefill, then the repeat tokens as they are fed, in pieces), and stoppable like the
// others.
TEST(RerunProgress, KvzipScoringIsAPassOfItsOwn) {
  if (!fs::exists(kStories / "stories260K.bin")) GTEST_SKIP() << "stories260K model files absent";
  const fs::path dir = fs::temp_directory_path() / ("kvs_rerun_kvzip_" + std::to_string(::getpid()));
  const fs::path trace = recorded_trace(dir);
  const std::string before = file_bytes(trace);
  const ArgList args = {trace.string(), "--policy", "kvzip", "--budget", "16", "--threads", "1"};
  std::vector<std::string> passes;  // in the order first reported
  int scoring_done = 0, scoring_total = 0;
  RerunCallbacks cb;
  cb.on_progress = [&](const PassProgress& p) {
    EXPECT_EQ(p.count, 3);
    if (passes.empty() || passes.back() != p.pass) passes.push_back(p.pass);
    EXPECT_EQ(p.index + 1, static_cast<int>(passes.size()));
    if (p.pass == "KVzip scoring" && p.decode) {
      EXPECT_GT(p.done, scoring_done);
      scoring_done = p.done;
      scoring_total = p.total;
    }
  };
  rerun_trace(args, cb);
  EXPECT_EQ(passes, (std::vector<std::string>{"reference run", "KVzip scoring", "kvzip_b16"}));
  EXPECT_GT(scoring_total, 0);
  EXPECT_EQ(scoring_done, scoring_total);

  // Stopped once the scoring has fed tokens (on a freshly recorded trace): nothing appended.
  const fs::path again = recorded_trace(dir);
  const std::string fresh = file_bytes(again);
  bool stop = false;
  cb.on_progress = [&](const PassProgress& p) {
    EXPECT_NE(p.pass, "kvzip_b16") << "a pass after the stop";
    stop = stop || (p.pass == "KVzip scoring" && p.decode);
  };
  cb.cancelled = [&] { return stop; };
  EXPECT_THROW(rerun_trace(args, cb), InputError);
  EXPECT_EQ(file_bytes(again), fresh);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kvs
