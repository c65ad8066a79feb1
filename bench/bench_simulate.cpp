// Simulation throughput of every policy on a synthetic recording shaped like a 30-layer,
// 9-head (3 KV heads) model at 2000 tokens and 200 decode steps. Rows are generated step by
// step (the full recording would be ~1.7 GB), so generation time is measured and subtracted.
// Prints a table of token·head·step updates per second (sum over steps of context length x
// layers x query heads, divided by simulation seconds).
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <time.h>

#include "analysis/policy.h"
#include "analysis/simulator.h"
#include "bench/bench_args.h"

using namespace kvs;

namespace {

constexpr int kLayers = 30, kHeads = 9, kKvHeads = 3, kHeadDim = 64;
constexpr int kTokens = 2000, kSteps = 200, kPrompt = kTokens - kSteps, kWindow = 32;

double thread_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

ModelShape bench_shape() {
  ModelShape s;
  s.n_layers = kLayers;
  s.n_heads = kHeads;
  s.n_kv_heads = kKvHeads;
  s.head_dim = kHeadDim;
  return s;
}

// Rows from a fixed pool of positive weights, shifted per (step, layer, head), with a sink and
// a recency bump, normalized on the fly.
class SyntheticSource : public StepSource {
 public:
  SyntheticSource() : pool_(4096) {
    std::mt19937 rng(7);
    std::exponential_distribution<float> e(1.0f);
    for (float& w : pool_) w = e(rng);
    ev_.shape = bench_shape();
    ev_.prompt_len = kPrompt;
    ev_.window = kWindow;
    std::uniform_real_distribution<float> u(0.0f, 1.0f);
    ev_.colsum.resize((size_t)kLayers * kHeads * kPrompt);
    for (float& v : ev_.colsum) v = u(rng);
    ev_.window_rows.resize((size_t)kLayers * kHeads * kWindow * kPrompt);
    for (float& v : ev_.window_rows) v = u(rng) / kPrompt;
    ev_.window_lse.assign((size_t)kLayers * kHeads * kWindow, 0.0f);
    ev_.key_scores.resize((size_t)kLayers * kKvHeads * kPrompt);
    for (float& v : ev_.key_scores) v = u(rng);
  }
  ModelShape shape() const override { return bench_shape(); }
  int prompt_len() const override { return kPrompt; }
  int n_steps() const override { return kSteps; }
  int total_len() const override { return kTokens; }
  int query_pos(int s) const override { return kPrompt + s; }
  const PrefillEvidence& prefill() const override { return ev_; }
  void read_step(int s, std::vector<float>& rows, std::vector<float>& lse) override {
    const double t0 = thread_seconds();
    const int q = kPrompt + s;
    rows.assign((size_t)kLayers * kHeads * kTokens, 0.0f);
    lse.resize((size_t)kLayers * kHeads);
    for (int lh = 0; lh < kLayers * kHeads; ++lh) {
      float* row = rows.data() + (size_t)lh * kTokens;
      const size_t shift = (size_t)lh * 131 + (size_t)s * 17;
      float sum = 0.0f;
      for (int j = 0; j <= q; ++j) {
        float w = pool_[(j + shift) & 4095];
        if (j == 0) w += 20.0f;
        if (j > q - 16) w += 2.0f;
        row[j] = w;
        sum += w;
      }
      const float inv = 1.0f / sum;
      for (int j = 0; j <= q; ++j) row[j] *= inv;
      lse[lh] = std::log(sum);
    }
    gen_seconds += thread_seconds() - t0;
  }
  double gen_seconds = 0.0;

 private:
  std::vector<float> pool_;  // [4096] positive weights
  PrefillEvidence ev_;
};

double updates() {
  double u = 0.0;
  for (int s = 0; s < kSteps; ++s) u += (double)(kPrompt + s + 1) * kLayers * kHeads;
  return u;
}

// CPU seconds of this thread spent simulating (generation excluded). CPU time, not wall time,
// so that a busy machine does not distort the comparison.
double time_run(const std::vector<std::string>& specs, int budget, bool metrics) {
  std::vector<std::unique_ptr<Policy>> owned;
  std::vector<Policy*> ptrs;
  for (const auto& s : specs) {
    owned.push_back(make_policy(parse_policy_spec(s, budget), bench_shape()));
    ptrs.push_back(owned.back().get());
  }
  SyntheticSource src;
  SimulateOptions opt;
  opt.metrics = metrics;
  const double t0 = thread_seconds();
  const std::vector<RunData> runs = simulate(src, ptrs, opt);
  return thread_seconds() - t0 - src.gen_seconds;
}

// The table for `names` (every policy when empty, then all of them in one pass); a bad name
// stops it before anything is printed.
int run(std::vector<std::string> names) {
  const int budget = 256;
  const bool all_policies = names.empty();
  if (all_policies) names = policy_names();
  for (const std::string& name : names) make_policy(parse_policy_spec(name, budget), bench_shape());
  std::printf("Simulation throughput: %d layers x %d heads (%d KV) x %d tokens x %d steps, budget %d\n",
              kLayers, kHeads, kKvHeads, kTokens, kSteps, budget);
  std::printf("(token.head.step updates = sum over steps of context x layers x query heads = %.3g)\n\n", updates());
  std::printf("| policy | sim only (CPU s) | updates/s | with metrics (CPU s) | updates/s |\n");
  std::printf("|---|---|---|---|---|\n");
  for (const std::string& name : names) {
    const double a = time_run({name}, budget, false);
    const double b = time_run({name}, budget, true);
    std::printf("| %s | %.2f | %.3g | %.2f | %.3g |\n", name.c_str(), a, updates() / a, b, updates() / b);
    std::fflush(stdout);
  }
  if (all_policies) {
    const double all = time_run(names, budget, true);
    std::printf("| all %zu in one pass | | | %.2f | %.3g |\n", names.size(), all,
                (double)names.size() * updates() / all);
  }
  return 0;
}

}  // namespace

// Usage: bench_simulate [policy ...] (default: every policy, then all of them in one pass).
int main(int argc, char** argv) {
  return bench::run_main("bench_simulate", [&] { return run(std::vector<std::string>(argv + 1, argv + argc)); });
}
