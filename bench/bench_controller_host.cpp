// The host's share of a live policy's decode step on the Llama-3-8B shape (32 layers, 32 query
// heads over 8 KV heads) at long contexts: per layer, the new entry pushed into each KV head, the
// live run's controller (analysis/enforcing_controller.h: the policy's before_attention and the
// kept set recorded), the attended rows listed for each KV head that skips keys (as the engines
// list them, inference/attended_rows.h), its key ranking and group rows handed over where it asks
// for them (the device makes both), and its after_attention, with rows where it reads them
// (renormalized by the controller). On a GPU this runs between a layer's attention and the next
// one's, while the GPU computes the layer's output product and FFN and the next layer's q/k/v
// product (inference/cuda_backend.cpp): every weight of the layers but none of the K/V, which the
// attention reads before the rows are ready. So each figure is printed against that window at the
// GPU's memory-bandwidth limit (the layers' fp16 weights ÷ 3.02 TB/s, the copy bandwidth
// bench_cuda measured on an H100); above 1 the GPU waits for the host, whatever the kernels do. A
// policy that reads rows also waits for their copy to the host within the same window (4 MB a
// layer at 32K keys; group rows, one a KV head, 1 MB), which this does not count. A policy may
// spread a layer's work over the host's cores (OpenMP; OMP_NUM_THREADS=1 for one). No GPU or model
// is needed: the cache is the positions the CUDA backend keeps beside its rows (KvPositions), the
// rows and group rows random, the rankings random positions.
//
//   bench_controller_host [--contexts 4096,32768] [--steps 16] [--policy SPEC]...
// Policies default to streamingllm, h2o, tova and omnikv, each at a budget of half the context
// (as bench_cuda --policy runs them).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <omp.h>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "analysis/enforcing_controller.h"
#include "analysis/policy.h"
#include "analysis/prefill_evidence.h"
#include "bench/llama8b_limit.h"
#include "inference/attended_rows.h"
#include "inference/errors.h"
#include "inference/hooks.h"
#include "inference/kv_positions.h"

namespace {

using Clock = std::chrono::steady_clock;
using kvs::AttentionBlock;

constexpr int kLayers = bench::kLayers8b, kHeads = bench::kHeads8b, kKvHeads = bench::kKvHeads8b,
              kHeadDim = bench::kHeadDim8b;
using bench::kCopyBandwidth;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// KvSlots over KvPositions alone, as the CUDA backend's cache keeps them beside its device rows.
class Positions : public kvs::KvSlots {
 public:
  explicit Positions(int capacity) : p(kLayers, kKvHeads, capacity, "bench cache") {}
  int n_layers() const override { return kLayers; }
  int n_kv_heads() const override { return kKvHeads; }
  std::span<const int32_t> held(int l, int g) const override { return p.held(l, g); }
  std::span<uint8_t> active(int l, int g) override { return p.active(l, g); }
  void evict(int l, int g, std::span<const uint8_t> keep) override { p.compact(l, g, keep); }
  kvs::KvPositions p;
};

struct Options {
  std::vector<int> contexts{4096, 32768};
  int steps = 16;
  std::vector<std::string> policies;
};

int fail(const std::string& why) {
  std::fprintf(stderr, "bench_controller_host: %s\n", why.c_str());
  return 2;
}

// Median host seconds of a decode step with `spec` live at half of a T-token prompt.
double host_step(const std::string& spec, int T, int steps) {
  const kvs::ModelShape shape{kLayers, kHeads, kKvHeads, kHeadDim};
  const int budget = std::max(1, T / 2);
  const std::unique_ptr<kvs::Policy> policy = kvs::make_policy(kvs::parse_policy_spec(spec, budget), shape);
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  // The prompt's evidence: random column sums (what H2O starts from) and last row (TOVA's).
  kvs::PrefillEvidence ev;
  ev.shape = shape;
  ev.prompt_len = T;
  ev.window = 1;
  ev.colsum.resize(static_cast<std::size_t>(kLayers) * kHeads * T);       // [L, H, P]
  ev.window_rows.resize(static_cast<std::size_t>(kLayers) * kHeads * T);  // [L, H, 1, P]
  ev.window_lse.assign(static_cast<std::size_t>(kLayers) * kHeads, 0.0f);  // [L, H, 1]
  for (float& v : ev.colsum) v = unit(rng);
  for (float& v : ev.window_rows) v = unit(rng) / static_cast<float>(T);
  kvs::PolicyContext ctx;
  ctx.shape = shape;
  ctx.prompt_len = T;
  ctx.prefill = &ev;
  policy->begin(ctx);
  kvs::EnforcingController live(*policy, ev, shape, T, steps);
  Positions kv(T + steps);
  for (int l = 0; l < kLayers; ++l)
    for (int g = 0; g < kKvHeads; ++g) kv.p.push(l, g, 0, T);
  live.after_prefill(T, kv);

  const int cap = T + steps;
  // Every layer's rows (or group rows) apart, as a step brings them: read from memory, not from a
  // cache that one layer's reuse would keep them in. Made only for a policy that reads some.
  bool reads_rows = false, reads_groups = false;
  for (int l = 0; l < kLayers; ++l) {
    reads_rows = reads_rows || live.needs_decode_rows(l);
    reads_groups = reads_groups || live.group_rows(l).has_value();
  }
  std::vector<float> probs(reads_rows ? static_cast<std::size_t>(kLayers) * kHeads * cap : 0);  // [L, H, cap]
  for (float& v : probs) v = unit(rng) / static_cast<float>(T);
  const std::vector<float> lse(kHeads, 0.0f);                                   // [H]
  std::vector<float> group_values(reads_groups ? static_cast<std::size_t>(kLayers) * kKvHeads * cap : 0);
  for (float& v : group_values) v = unit(rng) / static_cast<float>(T);          // [L, Hkv, cap]
  std::vector<kvs::GroupRow> group_rows(kKvHeads);                              // [Hkv]
  std::vector<int32_t> listed(static_cast<std::size_t>(2) * cap);               // [cap] rows, [cap] positions
  std::vector<int32_t> ranked(static_cast<std::size_t>(T));                     // [T] positions
  std::iota(ranked.begin(), ranked.end(), 0);
  std::vector<std::vector<int32_t>> top(kLayers);                               // [L][k] ranked positions
  std::vector<AttentionBlock> blocks(kHeads);                                   // [H]
  std::vector<double> step_s;
  for (int s = 0; s < steps; ++s) {
    const int pos = T + s;
    // The rankings asked for: random positions below each one's bound, ascending (drawn before
    // the clock runs, as a GPU ranks them).
    for (int l = 0; l < kLayers; ++l) {
      const kvs::KeyRanking ranking = live.key_ranking(l);
      top[l].clear();
      if (ranking.k == 0) continue;
      std::shuffle(ranked.begin(), ranked.end(), rng);
      for (int32_t p : ranked)
        if (p < std::min(ranking.below, pos) && static_cast<int>(top[l].size()) < ranking.k) top[l].push_back(p);
      std::sort(top[l].begin(), top[l].end());
    }
    const auto t0 = Clock::now();
    for (int l = 0; l < kLayers; ++l) {
      for (int g = 0; g < kKvHeads; ++g) kv.p.push(l, g, pos, 1);
      live.before_attention(l, pos, kv);
      // A head that skips keys is listed, unless the one before it skips the same (the CUDA
      // backend then uploads one list for both).
      bool prev_listed = false;
      for (int g = 0; g < kKvHeads; ++g) {
        const std::span<const uint8_t> act = kv.p.active(l, g);
        const bool skips = std::memchr(act.data(), 0, act.size()) != nullptr;
        if (skips && !(prev_listed && kv.p.same_entries(l, g - 1, g)))
          kvs::list_attended(kv.p.held(l, g), kv.p.rows(l, g), act, 0, listed.data(), listed.data() + cap);
        prev_listed = skips;
      }
      if (!top[l].empty()) live.on_key_ranking(l, pos, top[l]);
      if (live.group_rows(l)) {
        for (int g = 0; g < kKvHeads; ++g) {
          const std::span<const int32_t> held = kv.p.held(l, g);
          group_rows[g] = {g, static_cast<int>(held.size()), held.data(),
                           group_values.data() + (static_cast<std::size_t>(l) * kKvHeads + g) * cap};
        }
        live.on_group_rows(l, pos, group_rows);
      }
      if (!live.needs_decode_rows(l)) {
        live.after_attention(l, pos, {}, kv);
        continue;
      }
      for (int h = 0; h < kHeads; ++h) {
        const std::span<const int32_t> held = kv.p.held(l, h / (kHeads / kKvHeads));
        blocks[h] = AttentionBlock::decode_row(l, h, pos, static_cast<int>(held.size()), held.data(),
                                               probs.data() + (static_cast<std::size_t>(l) * kHeads + h) * cap,
                                               lse.data() + h);
      }
      live.after_attention(l, pos, blocks, kv);
    }
    step_s.push_back(seconds_since(t0));
  }
  std::sort(step_s.begin(), step_s.end());
  return step_s[step_s.size() / 2];
}

std::vector<int> parse_contexts(const std::string& v) {
  std::vector<int> out;
  std::stringstream ss(v);
  std::string item;
  while (std::getline(ss, item, ',')) {
    std::size_t used = 0;
    int t = 0;
    try {
      t = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || t < 2 || t > (1 << 20)) return {};
    out.push_back(t);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return fail(a + ": expected a value after it");
    const std::string v = argv[++i];
    if (a == "--contexts") {
      o.contexts = parse_contexts(v);
      if (o.contexts.empty()) return fail("--contexts: expected comma-separated lengths from 2 to 1048576, got '" + v + "'");
    } else if (a == "--steps") {
      try {
        o.steps = std::stoi(v);
      } catch (const std::exception&) {
        o.steps = 0;
      }
      if (o.steps < 1 || o.steps > 10000) return fail("--steps: expected 1 to 10000, got '" + v + "'");
    } else if (a == "--policy") {
      o.policies.push_back(v);
    } else {
      return fail("unknown flag '" + a + "' (--contexts, --steps, --policy)");
    }
  }
  if (o.policies.empty()) o.policies = {"streamingllm", "h2o", "tova", "omnikv"};
  for (const std::string& spec : o.policies) {
    try {
      kvs::make_policy(kvs::parse_policy_spec(spec, 1), kvs::ModelShape{kLayers, kHeads, kKvHeads, kHeadDim});
    } catch (const kvs::InputError& e) {
      return fail(e.what());
    }
  }
  std::printf("host time of a live policy's decode step, Llama-3-8B shape (32 layers, 32 heads over 8 KV heads), "
              "budget = half the context, median of %d steps, OpenMP threads: %d\n\n",
              o.steps, omp_get_max_threads());
  std::printf("| context | policy | host ms / step | GPU step at the limit, ms | window, ms "
              "| host / window (keep below 1) |\n|---|---|---|---|---|---|\n");
  for (int T : o.contexts) {
    const double gpu_step = bench::gpu_step_at_limit(T);
    const double window = bench::kLayerWeightBytes8b / kCopyBandwidth;
    for (const std::string& spec : o.policies) {
      double s = 0.0;
      try {
        s = host_step(spec, T, o.steps);
      } catch (const kvs::InputError& e) {
        return fail(e.what());
      }
      std::printf("| %d | %s | %.2f | %.2f | %.2f | %.2f |\n", T, spec.c_str(), 1e3 * s, 1e3 * gpu_step, 1e3 * window,
                  s / window);
      std::fflush(stdout);
    }
  }
  std::printf("\nThe GPU step is the hooks-off limit: (%.2f GB of weights + %.0f KB of K/V a position) / %.2f TB/s.\n"
              "The window is what the GPU computes meanwhile: the layers' %.2f GB of weights / %.2f TB/s;\n"
              "a policy that reads rows or group rows also waits for their copy within it (not counted here).\n",
              bench::kWeightBytes8b / 1e9, bench::kKvBytesPerPosition8b / 1e3, kCopyBandwidth / 1e12,
              bench::kLayerWeightBytes8b / 1e9,
              kCopyBandwidth / 1e12);
  return 0;
}
