// Where decode's products lose against the streaming probe: a stories110M-shaped model's weight
// matrices (dim 768, 12 layers, vocab 32000, fp32), or a model file's, read three ways, alternating with the
// bandwidth probe in one process so that all see the same memory level:
//   team    the products as decode issues them: through a DecodeTeam of all threads, one join
//           per product (q/k/v stacked, gate/up stacked, as the engine does), in token order;
//   no-join the same matvec_panels over the same matrices, each thread its half of every matrix
//           in token order with no join between products (the work split decode cannot have,
//           since each product reads the previous one's output);
//   probe   the streaming read decode's limit is measured against.
// Prints, per round, GB/s and the ratio to the probe (the better of the probes before and
// after), then the medians over rounds whose two probes agree within 10%.
// Usage: bench_products [rounds] [model_path]   (runs with OMP_WAIT_POLICY=passive unless the caller set one)
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/bandwidth_probe.h"
#include "bench/bench_args.h"
#include "bench/random_model.h"
#include "inference/decode_team.h"
#include "inference/errors.h"
#include "inference/loader.h"
#include "kernels/matmul.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// One product of a token: jobs stacked over the same input, `cols` long.
struct Product {
  std::vector<kvs::ops::MatvecJob> jobs;
  int cols = 0;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (!std::getenv("OMP_WAIT_POLICY")) {
    setenv("OMP_WAIT_POLICY", "passive", 1);
    execv("/proc/self/exe", argv);  // returns only on failure: then run with the default policy
  }
  return bench::run_main("bench_products", [&] {
    bench::at_most(argc, argv, 2, "bench_products [rounds] [model_path]");
    const int rounds = bench::count_arg(argc, argv, 1, "rounds", 20, 1, 10000);
    const std::string path = argc > 2 ? argv[2] : "";
    const kvs::Model model = path.empty() ? kvs::bench::stories110m_shaped() : kvs::load_model(path);
    const kvs::ModelConfig& c = model.config;
    const int dim = c.dim, hid = c.hidden_dim, qd = c.q_dim(), kvd = c.kv_dim();
    std::vector<float> x(std::max({dim, qd, hid}), 0.01f);  // [max cols] the products' input
    // [max rows] their output (overwritten)
    std::vector<float> y(std::max({c.vocab_size, 2 * hid, qd + 2 * kvd}), 0.0f);
    std::vector<Product> token;                // decode's products in order
    for (const auto& lw : model.weights.layers) {
      token.push_back({{{y.data(), lw.wq.weights(), qd}, {y.data() + qd, lw.wk.weights(), kvd},
                        {y.data() + qd + kvd, lw.wv.weights(), kvd}}, dim});
      token.push_back({{{y.data(), lw.wo.weights(), dim}}, qd});
      token.push_back({{{y.data(), lw.w_gate.weights(), hid}, {y.data() + hid, lw.w_up.weights(), hid}}, dim});
      token.push_back({{{y.data(), lw.w_down.weights(), dim}}, hid});
    }
    token.push_back({{{y.data(), model.classifier().weights(), c.vocab_size}}, dim});
    const double bytes = static_cast<double>(model.weight_bytes_per_token());

    kvs::DecodeTeam team;
    team.resize(omp_get_max_threads());
    constexpr long kPanels = std::max(1, 32 / kvs::ops::kPanelRows);  // panels per dealt chunk, as decode deals them
    constexpr int kProbePasses = 4;   // 2 GiB read back to back, as a round's 4 tokens per way
    auto run_team = [&] {
      for (const Product& p : token)
        team.parallel(kvs::ops::panel_count(p.jobs), kPanels,
                      [&](long b, long e) { kvs::ops::matvec_panels(p.jobs, x.data(), p.cols, b, e); });
    };
    auto run_no_join = [&] {
  #pragma omp parallel
      {
        const long t = omp_get_thread_num(), nt = omp_get_num_threads();
        for (const Product& p : token) {
          const long n = kvs::ops::panel_count(p.jobs);
          kvs::ops::matvec_panels(p.jobs, x.data(), p.cols, n * t / nt, n * (t + 1) / nt);
        }
      }
    };

    kvs::bench::BandwidthProbe probe(std::size_t{512} << 20);
    std::printf("%d threads; %.0f MB of weights per token; GB/s (ratio to the probe) per round\n",
                omp_get_max_threads(), bytes / 1e6);
    std::vector<double> team_ratio, free_ratio, probes;
    double before = probe.measure(kProbePasses).sustained;
    for (int r = 0; r < rounds; ++r) {
      constexpr int kTokens = 4;
      auto t0 = Clock::now();
      for (int i = 0; i < kTokens; ++i) run_team();
      const double team_bw = kTokens * bytes / seconds_since(t0);
      t0 = Clock::now();
      for (int i = 0; i < kTokens; ++i) run_no_join();
      const double free_bw = kTokens * bytes / seconds_since(t0);
      const double after = probe.measure(kProbePasses).sustained, bw = std::max(before, after);
      const bool kept = std::abs(before - after) <= 0.10 * bw;
      std::printf("probe %5.1f | team %5.1f (%.2f) | no-join %5.1f (%.2f)%s\n", bw / 1e9, team_bw / 1e9, team_bw / bw,
                  free_bw / 1e9, free_bw / bw, kept ? "" : "  (level changed: left out)");
      if (kept) {
        team_ratio.push_back(team_bw / bw);
        free_ratio.push_back(free_bw / bw);
        probes.push_back(bw);
      }
      before = after;
    }
    std::printf("\nmedians over %zu of %d rounds: probe %.1f GB/s, team %.2f, no-join %.2f of the probe\n",
                probes.size(), rounds, median(probes) / 1e9, median(team_ratio), median(free_ratio));
    return 0;
  });
}
