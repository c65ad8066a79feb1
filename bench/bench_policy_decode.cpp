// Decode speed under a live eviction policy versus the full cache at equal context: a random-
// weight model shaped so that attention is a large share of a decode step, a long prompt, then
// decode steps with each policy as the engine's cache controller. Prints ms/token and the ratio.
// Usage: bench_policy_decode [prompt_len (2048)] [decode_steps (64)] [threads (0 = all)]
// Budgets are prompt_len / 16 and prompt_len / 4 (128 and 512 by default).
// Runs with OMP_WAIT_POLICY=passive unless the caller set a policy (it re-executes itself).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "analysis/policy.h"
#include "analysis/prefill_evidence.h"
#include "bench/bench_args.h"
#include "bench/random_model.h"
#include "inference/engine.h"
#include "inference/errors.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// dim 512, 8 layers, 8 query heads over 2 KV heads (head_dim 64), a narrow FFN (hidden 512, which
// also keeps the long prefill affordable), vocab 4096, context 8192: at 2048 cached tokens
// attention is about two thirds of a decode step's multiply-adds.
kvs::Model attention_heavy_model() {
  kvs::ModelConfig c;
  c.name = "random attention-heavy";
  c.dim = 512;
  c.hidden_dim = 512;
  c.n_layers = 8;
  c.n_heads = 8;
  c.n_kv_heads = 2;
  c.head_dim = 64;
  c.vocab_size = 4096;
  c.seq_len = 8192;
  return kvs::bench::random_model(c, 0.044f, 0.044f);  // ~1/sqrt(dim)
}

// One engine decoding greedily under one controller (nullptr = full cache).
struct Lane {
  std::string label;
  std::unique_ptr<kvs::Policy> policy;
  std::unique_ptr<kvs::PrefillReducer> reducer;
  std::unique_ptr<kvs::Engine> engine;
  int token = 0;
  std::vector<double> ms;  // ms/token of each chunk
};

constexpr int kChunk = 4;  // short chunks: the median over many resists load spikes

void prefill(Lane& lane, const kvs::Model& model, const std::vector<int>& prompt, int threads) {
  kvs::EngineOptions eo;
  eo.n_threads = threads;
  lane.engine = std::make_unique<kvs::Engine>(model, eo);
  const kvs::ModelConfig& c = model.config;
  const kvs::ModelShape shape = kvs::shape_of(c);
  if (lane.policy) {
    lane.reducer = std::make_unique<kvs::PrefillReducer>(shape, 64);
    kvs::PolicyContext ctx;
    ctx.shape = shape;
    ctx.prompt_len = static_cast<int>(prompt.size());
    ctx.prefill = &lane.reducer->evidence();
    lane.policy->begin(ctx);
    lane.engine->set_observer(lane.reducer.get());
    lane.engine->set_controller(lane.policy.get());
  }
  const auto logits = lane.engine->prefill(prompt);
  lane.token = static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  lane.engine->set_observer(nullptr);  // decode runs hook-free except for the controller
}

void decode_chunk(Lane& lane, int n) {
  const auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) {
    const auto logits = lane.engine->decode(lane.token);
    lane.token = static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  }
  lane.ms.push_back(1e3 * seconds_since(t0) / n);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (!std::getenv("OMP_WAIT_POLICY")) {
    setenv("OMP_WAIT_POLICY", "passive", 1);
    execv("/proc/self/exe", argv);  // returns only on failure: then run with the default policy
  }
  return bench::run_main("bench_policy_decode", [&] {
    bench::at_most(argc, argv, 3, "bench_policy_decode [prompt_len] [decode_steps] [threads]");
    const int P = bench::count_arg(argc, argv, 1, "prompt_len", 2048, 64, 8192);
    const int steps = bench::count_arg(argc, argv, 2, "decode_steps", 64, 1, 8192);
    const int threads = bench::count_arg(argc, argv, 3, "threads", 0, 0, 4096);
    auto t0 = Clock::now();
    const kvs::Model model = attention_heavy_model();
    const kvs::ModelConfig& c = model.config;
    if (P < 64 || P + steps > c.seq_len) throw kvs::input_error("prompt_len", "must be in [64, 8192 - steps]");
    const int small = P / 16, large = P / 4;  // budgets: a small and a moderate fraction of the context
    const kvs::ModelShape shape = kvs::shape_of(c);
    std::vector<int> prompt(P);  // [P] pseudo-random tokens
    for (int i = 0; i < P; ++i) prompt[i] = static_cast<int>((i * 2654435761u + 17) % c.vocab_size);

    std::vector<Lane> lanes;
    auto add = [&](const std::string& spec, int budget) {
      Lane lane;
      lane.label = spec == "full" ? "full" : spec + " B=" + (budget >= P + steps ? "all" : std::to_string(budget));
      if (spec != "full") lane.policy = kvs::make_policy(kvs::parse_policy_spec(spec, budget), shape);
      lanes.push_back(std::move(lane));
    };
    add("full", 0);
    add("h2o", P + steps);  // equal context: the policy's bookkeeping alone, nothing evicted
    add("streamingllm", large);
    add("streamingllm", small);
    add("h2o", small);
    add("snapkv", small);
    add("omnikv", small);
    std::printf("model: %s, dim %d, %d layers, %d heads (%d KV, head_dim %d), hidden %d, vocab %d\n",
                c.name.c_str(), c.dim, c.n_layers, c.n_heads, c.n_kv_heads, c.head_dim, c.hidden_dim, c.vocab_size);
    std::printf("prompt %d tokens, %d decode steps, threads %s; built in %.1f s\n", P, steps,
                threads > 0 ? std::to_string(threads).c_str() : "all", seconds_since(t0));
    for (Lane& lane : lanes) {
      t0 = Clock::now();
      prefill(lane, model, prompt, threads);
      std::printf("  prefill %-18s %.1f s, %.1f MiB KV held\n", lane.label.c_str(), seconds_since(t0),
                  lane.engine->kv_bytes() / 1048576.0);
      std::fflush(stdout);
    }
    // Chunks alternate between lanes so that every lane sees the same machine load.
    for (int done = 0; done < steps; done += kChunk)
      for (Lane& lane : lanes) decode_chunk(lane, std::min(kChunk, steps - done));

    const double full_ms = median(lanes[0].ms);
    std::printf("\n%-20s %12s %14s %14s %12s\n", "policy", "ms/token", "ratio to full", "KV held MiB", "KV ratio");
    const double full_kv = static_cast<double>(lanes[0].engine->kv_bytes());
    for (const Lane& lane : lanes) {
      const double ms = median(lane.ms), kv = static_cast<double>(lane.engine->kv_bytes());
      std::printf("%-20s %12.2f %14.3f %14.1f %12.3f\n", lane.label.c_str(), ms, ms / full_ms, kv / 1048576.0,
                  kv / full_kv);
    }
    std::printf("(median over %d-step chunks; context at the end: %d positions)\n", kChunk, P + steps);
    return 0;
  });
}
