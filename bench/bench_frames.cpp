// Frame-build benchmark of the desktop app's views on a trace shaped like SmolLM2-135M
// (30 layers x 9 heads (3 KV heads) x 2,000 tokens x 200 decode steps, float16 decode rows):
// median CPU time of ImGui::NewFrame + one view + ImGui::Render (no GL: the draw lists are built,
// not rasterised), at a fixed step and when the step changes every frame, against the 8 ms
// target; and the time to open the trace and build its first frame (all views).
//
//   bench_frames [--trace PATH] [--frames N] [--large]
// Without --trace the synthetic trace is written once to /tmp/kvscope_bench_smollm2.h5 (reused);
// --large writes (once) and opens /tmp/kvscope_bench_large.h5 instead: 600 float32 steps with
// noisy rows that barely compress (over 1 GB), for the open-and-first-frame time.
#include <imgui.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "analysis/head_stats.h"
#include "analysis/policy.h"
#include "analysis/similarity.h"
#include "analysis/simulator.h"
#include "analysis/trace.h"
#include "app/cli/args.h"
#include "app/gui/app_state.h"
#include "app/gui/fonts.h"
#include "app/views/view.h"
#include "bench/bench_args.h"

using namespace kvs;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kL = 30, kH = 9, kG = 3, kP = 1800;
constexpr double kTargetMs = 8.0;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

struct BenchTrace {
  int steps = 200;
  std::string dtype = "float16";
  bool noise = false;  // per-element jitter that defeats compression (large-file test)
  bool runs = true;    // simulate policies into the trace
};

// Attention row of query q for (l, h): a sink on key 0, a recent window, a few heavy keys that
// move with the layer, and a smooth background (plus jitter); normalised to sum 1.
void synthetic_row(int l, int h, int q, bool noise, float* out) {
  double sum = 0.0;
  uint32_t state = (uint32_t)(q * 7919 + l * 131 + h * 17 + 1);
  for (int k = 0; k <= q; ++k) {
    float v = 0.05f + 0.02f * (1.0f + std::sin(0.013f * k * (h + 1) + 0.7f * l));
    if (noise) {
      state = state * 1664525u + 1013904223u;
      v += 0.02f * (float)(state >> 8) / 16777216.0f;
    }
    if (k == 0) v += 30.0f * (0.2f + 0.8f * (float)((l * 7 + h * 3) % 10) / 10.0f);
    if (q - k < 16) v += 2.0f;
    if ((k * 2654435761u + (unsigned)l * 97u) % 211u == 0) v += 3.0f;
    out[k] = v;
    sum += v;
  }
  for (int k = 0; k <= q; ++k) out[k] = (float)(out[k] / sum);
}

void write_bench_trace(const std::string& path, const BenchTrace& b) {
  const int S = b.steps, T = kP + b.steps;
  std::printf("writing the SmolLM2-shaped trace %s (once)...\n", path.c_str());
  const auto t0 = Clock::now();
  TraceMeta m;
  m.model = "synthetic SmolLM2-135M shape";
  m.shape = {kL, kH, kG, 64};
  m.prompt_len = kP;
  m.n_steps = S;
  m.vocab_size = 49152;
  m.prompt = "synthetic";
  m.decode_dtype = b.dtype;
  PrefillEvidence ev;
  ev.shape = m.shape;
  ev.prompt_len = kP;
  ev.window = 32;
  ev.colsum.assign((size_t)kL * kH * kP, 0.0f);
  ev.window_rows.assign((size_t)kL * kH * ev.window * kP, 0.0f);
  ev.window_lse.assign((size_t)kL * kH * ev.window, 0.0f);
  for (int l = 0; l < kL; ++l)
    for (int h = 0; h < kH; ++h)
      for (int w = 0; w < ev.window; ++w) {
        float* r = &ev.window_rows[(((size_t)l * kH + h) * ev.window + w) * kP];
        synthetic_row(l, h, kP - ev.window + w, false, r);
        for (int k = 0; k < kP; ++k) ev.colsum[((size_t)l * kH + h) * kP + k] += r[k] * (kP / (float)ev.window);
      }
  {
    TraceWriter w(path, m, S);
    std::vector<float> rows((size_t)kL * kH * T), lse((size_t)kL * kH, 2.0f);  // [L, H, T], [L, H]
    HeadStatsAccumulator heads(m.shape, {});
    std::vector<double> sim((size_t)kL * kL, 0.0);  // [L, L]
    const int k = default_similarity_k(kP);
    for (int s = 0; s < S; ++s) {
      std::fill(rows.begin(), rows.end(), 0.0f);
      for (int l = 0; l < kL; ++l)
        for (int h = 0; h < kH; ++h) synthetic_row(l, h, kP + s, b.noise, &rows[((size_t)l * kH + h) * T]);
      w.write_decode_step(s, kP + s, rows, lse);
      heads.add_step(rows, T, kP + s);
      const auto ss = step_similarity(rows, lse, kL, kH, T, kP, k);
      for (size_t i = 0; i < ss.size(); ++i) sim[i] += ss[i] / S;
    }
    w.write_prefill(ev, {});
    const HeadStats st = heads.finish();
    w.write_array("/heads/sink_mass", {"sink_mass", {kL, kH}, st.sink_mass});
    w.write_array("/heads/locality", {"locality", {kL, kH}, st.locality});
    w.write_array("/heads/entropy", {"entropy", {kL, kH}, st.entropy});
    w.write_array("/layers/similarity", {"similarity", {kL, kL}, std::vector<float>(sim.begin(), sim.end())});
    std::vector<int32_t> ids(T);
    std::vector<std::string> texts(T);
    for (int i = 0; i < T; ++i) ids[i] = i % 49152, texts[i] = " t" + std::to_string(i);
    w.commit(m, ids, texts);
  }
  if (b.runs) {
    TraceReader reader(path);
    std::vector<std::unique_ptr<Policy>> owned;
    std::vector<Policy*> policies;
    for (const char* spec : {"streamingllm", "streamingllm:sinks=0", "h2o", "snapkv"}) {
      owned.push_back(make_policy(parse_policy_spec(spec, 256), m.shape));
      policies.push_back(owned.back().get());
    }
    append_runs(path, simulate(reader, policies, SimulateOptions{}));
  }
  std::printf("  written in %.1f s, %.1f MB\n", ms_since(t0) / 1000.0, std::filesystem::file_size(path) / 1e6);
}

// One frame with one view (or all when view == nullptr) in a 1600x1000 display.
void build_frame(AppState& app, std::vector<std::unique_ptr<View>>& views, View* only) {
  ImGuiIO& io = ImGui::GetIO();
  io.DisplaySize = ImVec2(1600, 1000);
  io.DeltaTime = 1.0f / 60.0f;
  app.tick(0.0);
  ImGui::NewFrame();
  for (auto& v : views) {
    if (only && v.get() != only) continue;
    ImGui::SetNextWindowPos(ImVec2(0, 0), ImGuiCond_Always);
    ImGui::SetNextWindowSize(ImVec2(1600, 1000), ImGuiCond_Always);
    if (ImGui::Begin(v->title())) v->draw(app);
    ImGui::End();
  }
  ImGui::Render();
}

// Frames until the views' background reads are done.
void settle(AppState& app, std::vector<std::unique_ptr<View>>& views) {
  for (int i = 0; i < 6; ++i) {
    build_frame(app, views, nullptr);
    app.io.wait_idle();
    app.engine.wait_idle();
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress lines appear as they happen
  return bench::run_main("bench_frames", [&] {
    const kvs::Args args(std::vector<std::string>(argv + 1, argv + argc), {"--trace", "--frames"}, {"--large"});
    if (!args.positional().empty())
      throw kvs::input_error(args.positional()[0],
                             "unexpected (usage: bench_frames [--trace PATH] [--frames N] [--large])");
    const bool given = args.has("--trace");
    const int frames = args.integer("--frames", 60, 5, 100000);
    const BenchTrace shape = args.has("--large") ? BenchTrace{600, "float32", true, false} : BenchTrace{};
    const std::string path = given ? args.str("--trace")
                             : shape.noise ? "/tmp/kvscope_bench_large.h5" : "/tmp/kvscope_bench_smollm2.h5";
    if (!given && !std::filesystem::exists(path)) write_bench_trace(path, shape);

    ImGui::CreateContext();
    ImGui::GetIO().IniFilename = nullptr;
    setup_fonts_and_style();
    unsigned char* pixels = nullptr;
    int tw = 0, th = 0;
    ImGui::GetIO().Fonts->GetTexDataAsRGBA32(&pixels, &tw, &th);

    {
      AppState app(true);
      std::vector<std::unique_ptr<View>> views = make_views("");
      // Open + first frame of every view (what the user waits for before seeing anything).
      const auto t_open = Clock::now();
      app.open_trace(path, false);
      if (!app.trace) {
        std::fprintf(stderr, "bench_frames: %s\n", app.last_open_error.c_str());
        return 2;
      }
      const double open_ms = ms_since(t_open);
      build_frame(app, views, nullptr);
      const double first_frame_ms = ms_since(t_open);
      const TraceMeta& m = app.trace->meta;
      std::printf("trace %s: %.1f MB, %d layers x %d heads x %d tokens x %d steps, %zu runs\n", path.c_str(),
                  std::filesystem::file_size(path) / 1e6, m.shape.n_layers, m.shape.n_heads, m.total_len(), m.n_steps,
                  app.trace->runs.size());
      std::printf("open (meta, tokens, stats, runs, last step): %.1f ms; first frame shown after %.1f ms (target 1000 ms, ratio %.2f)\n",
                  open_ms, first_frame_ms, first_frame_ms / 1000.0);
      settle(app, views);

      // Steps to cycle through, loaded beforehand so frame timings exclude file I/O.
      std::vector<std::shared_ptr<const StepSnapshot>> steps;
      for (int s = 0; s < std::min(8, app.n_steps()); ++s)
        steps.push_back(load_step_snapshot(*app.reader, *app.trace, app.n_steps() - 1 - s));
      std::printf("\n%-16s %12s %14s %10s\n", "view", "steady ms", "step-change ms", "vs 8 ms");
      for (auto& v : views) {
        std::vector<double> steady, changing;
        for (int f = 0; f < frames; ++f) {
          const auto t0 = Clock::now();
          build_frame(app, views, v.get());
          steady.push_back(ms_since(t0));
        }
        for (int f = 0; f < frames; ++f) {
          const auto& s = steps[f % steps.size()];
          app.step = s->step;
          app.step_data = s;
          const auto t0 = Clock::now();
          build_frame(app, views, v.get());
          changing.push_back(ms_since(t0));
        }
        const double worst = std::max(median(steady), median(changing));
        std::printf("%-16s %12.3f %14.3f %9.2fx%s\n", v->id(), median(steady), median(changing), worst / kTargetMs,
                    worst <= kTargetMs ? "" : "  OVER TARGET");
      }
      app.io.wait_idle();
      app.engine.wait_idle();
    }
    ImGui::DestroyContext();
    return 0;
  });
}
