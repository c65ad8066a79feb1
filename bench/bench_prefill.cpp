// Prefill compute against the machine's fp32 FMA peak: one SmolLM2-shaped layer (dim 576, 9 query
// heads and 3 KV heads of 64, hidden 1536) at several prompt lengths, its two compute kernels
// timed apart as the engine calls them:
//   attention  attend_causal_block over the engine's blocks of every head (four groups of
//              kCausalGroupRows query rows, several blocks per call; keys packed in panels,
//              values contiguous per KV head), 2 * 2 * head_dim flops per (query, key) pair;
//   products   the layer's seven matmuls over weights packed as the model keeps them, 2 * rows *
//              cols flops per token and matrix;
//   capture    what a recording adds to the attention: the time in the recorder's PrefillReducer,
//              fed every block between the kernel calls as the engine's observer (column sums, the
//              last 64 rows, the pooled map sized as for SmolLM2's 30 layers), in ms and as a
//              fraction of the attention alone;
//   capped     the attention with Gemma 2's soft cap on every score (ops::Scoring, cap 50), as a
//              fraction of the attention alone.
// The peak is measured here: every thread running independent FMA chains of the widest vectors
// the build uses (16-wide with AVX-512, 8-wide otherwise).
// Prints GFLOP/s and the fraction of the peak (best of three runs each).
// Usage: bench_prefill [prompt lengths...]   (default 512 2048 4096)
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "analysis/prefill_evidence.h"
#include "bench/bench_args.h"
#include "inference/model.h"
#include "kernels/attention.h"
#include "kernels/matmul.h"

namespace {

using f32x8 = float __attribute__((vector_size(32)));
using f32x16 = float __attribute__((vector_size(64)));

// GFLOP/s of all threads issuing ten independent multiply-add chains of fvec vectors (enough to
// cover the FMA latency on two pipes), best of three.
template <class fvec>
double fma_peak() {
  constexpr int Lanes = sizeof(fvec) / sizeof(float);
  const long iters = 50'000'000;
  double best = 0.0;
  for (int rep = 0; rep < 3; ++rep) {
    const double t0 = omp_get_wtime();
    float sink = 0.0f;
#pragma omp parallel reduction(+ : sink)
    {
      const fvec x = fvec{} + 0.999f, y = fvec{} + 1e-4f;
      fvec a0 = x, a1 = x + 1, a2 = x + 2, a3 = x + 3, a4 = x + 4, a5 = x + 5, a6 = x + 6, a7 = x + 7, a8 = x + 8,
            a9 = x + 9;
      for (long k = 0; k < iters; ++k) {
        a0 = a0 * x + y, a1 = a1 * x + y, a2 = a2 * x + y, a3 = a3 * x + y, a4 = a4 * x + y;
        a5 = a5 * x + y, a6 = a6 * x + y, a7 = a7 * x + y, a8 = a8 * x + y, a9 = a9 * x + y;
      }
      const fvec s = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9;
      sink += s[0];
    }
    const double t = omp_get_wtime() - t0;
    if (sink != 0.0f) best = std::max(best, iters * 10.0 * 2.0 * Lanes * omp_get_max_threads() / t / 1e9);
  }
  return best;
}

std::vector<float> random_vec(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d;
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

template <class F>
double best_seconds(F&& run) {
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  return bench::run_main("bench_prefill", [&] {
    using namespace kvs;
    std::vector<int> lengths;
    for (int i = 1; i < argc; ++i) lengths.push_back(kvs::parse_integer("prompt length", argv[i], 1, 1 << 17));
    if (lengths.empty()) lengths = {512, 2048, 4096};
    constexpr int dim = 576, heads = 9, kv_heads = 3, hd = 64, hidden = 1536;
    // As the engine: observer blocks of four groups, ops::causal_blocks_per_call of them per call.
    constexpr int block = 4 * ops::kCausalGroupRows;
    constexpr long qd = heads * hd, kvd = kv_heads * hd;

    // Both kernels' tiles use 16-wide vectors where the compiler targets AVX-512: ratios are
    // against the widest vectors the build uses.
  #ifdef __AVX512F__
    const double peak = fma_peak<f32x16>();
    std::printf("threads %d, fp32 FMA peak %.1f GFLOP/s with 16-wide vectors (8-wide: %.1f)\n\n",
                omp_get_max_threads(), peak, fma_peak<f32x8>());
  #else
    const double peak = fma_peak<f32x8>();
    std::printf("threads %d, fp32 FMA peak %.1f GFLOP/s\n\n", omp_get_max_threads(), peak);
  #endif
    std::printf("%7s | %-26s | %-26s | %-25s | %s\n", "prompt", "attention GFLOP/s (peak)", "products GFLOP/s (peak)",
                "capture ms (of attention)", "capped ms (of attention)");
    // The weights packed in panels (ops::pack_panels), as a loaded model holds them.
    const auto packed = [](const std::vector<float>& w, int rows, int cols) {
      std::vector<float> p(ops::packed_floats(rows, cols));
      ops::pack_panels(p.data(), w.data(), rows, cols);
      return p;
    };
    const auto w_qkvo = packed(random_vec((std::size_t)dim * dim, 1), dim, dim),
               w_kv = packed(random_vec((std::size_t)kvd * dim, 2), kvd, dim),
               w_ffn = packed(random_vec((std::size_t)hidden * dim, 3), hidden, dim),
               w_down = packed(random_vec((std::size_t)hidden * dim, 3), dim, hidden);
    for (const int P : lengths) {
      const auto q = random_vec((std::size_t)P * qd, 4), k = random_vec((std::size_t)P * kvd, 5),
                 x = random_vec((std::size_t)P * hidden, 6);
      const std::size_t panel_floats = ops::key_panel_floats(P, hd);
      std::vector<float> kp(kv_heads * panel_floats);     // [kv_heads, panels, hd, kPanelKeys]
      const auto vh = random_vec((std::size_t)P * kvd, 7);  // [kv_heads, P, hd]
      for (int g = 0; g < kv_heads; ++g)
        ops::pack_key_panels(kp.data() + g * panel_floats, k.data() + g * hd, kvd, P, hd);
      const int call_rows = std::min(P, ops::causal_blocks_per_call(block, P, omp_get_max_threads()) * block);
      std::vector<float> out((std::size_t)P * qd), probs((std::size_t)call_rows * P), lse(call_rows),
          y((std::size_t)P * hidden);

      // Every head's attention, its scores made by `score`; with a reducer, each block handed to it
      // after its kernel call, the time in those calls added to *t_reduce.
      const auto attention = [&](PrefillReducer* reducer, double* t_reduce, ops::Scoring score) {
        for (int h = 0; h < heads; ++h) {
          const int g = h / (heads / kv_heads);
          for (int q0 = 0; q0 < P; q0 += call_rows) {
            const int nq = std::min(call_rows, P - q0);
            const std::size_t row = (std::size_t)q0 * qd + h * hd;
            ops::attend_causal_block(out.data() + row, qd, probs.data(), lse.data(), q.data() + row, qd,
                                     kp.data() + g * panel_floats, vh.data() + (std::size_t)g * P * hd, hd, q0, nq, hd,
                                     0, score, block);
            if (!reducer) continue;
            const auto t0 = std::chrono::steady_clock::now();
            for (int b = 0; b * block < nq; ++b)
              reducer->on_attention(AttentionBlock::prefill(0, h, q0 + b * block, std::min(block, nq - b * block),
                                                            probs.data() + ops::causal_block_offset(q0, block, b),
                                                            lse.data() + b * block));
            *t_reduce += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          }
        }
      };
      const double t_att = best_seconds([&] { attention(nullptr, nullptr, 0.125f); });
      const double t_capped = best_seconds([&] { attention(nullptr, nullptr, ops::Scoring(0.125f, 50.0f)); });
      ModelConfig config;
      config.n_layers = 1, config.n_heads = heads, config.n_kv_heads = kv_heads, config.head_dim = hd;
      const std::vector<int> prompt(P, 1);
      PrefillReducer reducer(ModelShape{1, heads, kv_heads, hd}, 64, pool_block_for(P, 30, heads, 64u << 20));
      double t_cap = 1e30;
      for (int rep = 0; rep < 3; ++rep) {
        double t = 0.0;
        reducer.on_begin(config, prompt);
        attention(&reducer, &t, 0.125f);
        t_cap = std::min(t_cap, t);
      }
      const double t_mm = best_seconds([&] {
        ops::matmul_packed(y.data(), x.data(), w_qkvo.data(), P, dim, dim);    // q
        ops::matmul_packed(y.data(), x.data(), w_kv.data(), P, kvd, dim);      // k
        ops::matmul_packed(y.data(), x.data(), w_kv.data(), P, kvd, dim);      // v
        ops::matmul_packed(y.data(), x.data(), w_qkvo.data(), P, dim, dim);    // o
        ops::matmul_packed(y.data(), x.data(), w_ffn.data(), P, hidden, dim);  // gate
        ops::matmul_packed(y.data(), x.data(), w_ffn.data(), P, hidden, dim);  // up
        ops::matmul_packed(y.data(), x.data(), w_down.data(), P, dim, hidden);  // down
      });
      const double att_flops = 4.0 * heads * hd * P * (P + 1.0) / 2.0;
      const double mm_flops = 2.0 * P * (2.0 * dim * dim + 2.0 * kvd * dim + 3.0 * hidden * dim);
      const double att = att_flops / t_att / 1e9, mm = mm_flops / t_mm / 1e9;
      std::printf("%7d | %8.1f (%.2f) %7.1f ms | %8.1f (%.2f) %7.1f ms | %7.1f (%+.2f)%11s | %7.1f (%.2f)\n", P, att,
                  att / peak, t_att * 1e3, mm, mm / peak, t_mm * 1e3, t_cap * 1e3, t_cap / t_att, "",
                  t_capped * 1e3, t_capped / t_att);
    }
    return 0;
  });
}
