// Compare: two runs of the trace (or two traces) side by side — their lanes at the current step
// with the difference highlighted, their metrics at the step, and their generated texts with
// the first divergence marked; for two traces also how far their attention rows are apart (the
// same story recorded on two devices or storage types).
#include <imgui.h>
#include <imgui_stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "analysis/divergence.h"
#include "analysis/lanes.h"
#include "analysis/metric_info.h"
#include "analysis/sink_pair.h"
#include "analysis/trace_row_diff.h"
#include "app/gui/fonts.h"
#include "app/gui/jobs.h"
#include "app/gui/script.h"
#include "app/gui/widgets.h"
#include "app/views/run_at_step.h"
#include "app/views/view.h"

namespace kvs {
namespace {

// Colours of "only in A" / "only in B", apart from the lane palette above them (blue is kept,
// orange a heavy hitter there).
const ImU32 kOnlyA = IM_COL32(240, 110, 190, 255), kOnlyB = IM_COL32(170, 230, 60, 255);
const ImU32 kBoth = IM_COL32(120, 120, 128, 255), kNeither = IM_COL32(40, 40, 44, 255);
// A run with no cache at the step (its text ended before it), as the lanes' caveats.
const ImVec4 kEndedColor(1.0f, 0.78f, 0.3f, 1.0f);

class CompareView : public View {
 public:
  const char* id() const override { return "compare"; }
  const char* title() const override { return "Compare"; }

  void draw(AppState& app) override {
    if (!app.trace) {
      ImGui::TextDisabled("No trace open.");
      return;
    }
    ImGui::RadioButton("two runs", &mode_, 0);
    ImGui::SameLine();
    ImGui::RadioButton("two traces", &mode_, 1);
    if (mode_ == 0) draw_runs(app);
    else draw_traces(app);
  }

  CsvTable csv(const AppState& app) const override {
    CsvTable c;
    c.header = {"position", "token", "held_by_a", "held_by_b"};
    if (!app.trace) return c;
    for (size_t i = 0; i < diff_.size() && i < app.trace->token_texts.size(); ++i)
      c.add({std::to_string(i), token_label(app.trace->token_texts[i]), std::to_string(diff_[i] & 1), std::to_string((diff_[i] >> 1) & 1)});
    return c;
  }

  bool command(AppState& app, const std::string& verb, const std::string& arg) override {
    if (verb == "mode" && (arg == "runs" || arg == "traces")) {  // the Run view takes forced and free
      mode_ = arg == "traces" ? 1 : 0;
      return true;
    }
    if (verb == "sinkpair") {
      script_trace(app, verb, arg);
      const SinkPair p = find_sink_pair(app.trace->runs, sink_budget(*app.trace));
      if (!p.complete()) submit_simulation(app, sink_pair_missing_specs(p), p.budget);
      const SinkPair p2 = find_sink_pair(app.trace->runs, sink_budget(*app.trace));
      if (p2.complete()) app.run_a = p2.none, app.run_b = p2.with;
      else want_sink_pair_ = true;
      return true;
    }
    return false;
  }

 private:
  static std::string run_text(const TraceSnapshot& t, const RunData& r) {
    return r.eviction == "real" && !r.text.empty() ? r.text : t.generated_text;
  }

  // Wide enough for the longest run name (they differ in their ends: _free, _b32), within reason.
  static float combo_width(const TraceSnapshot& t) {
    float name_w = 0.0f;
    for (const RunData& r : t.runs) name_w = std::max(name_w, ImGui::CalcTextSize(r.name.c_str()).x);
    const float arrow = ImGui::GetFrameHeight() + 2 * ImGui::GetStyle().FramePadding.x;
    return std::clamp(name_w + arrow, 200.0f, 420.0f);
  }

  // On the current row when it fits (same_line_if_fits), else on the next.
  bool run_combo(const char* label, const TraceSnapshot& t, int& index) {
    bool changed = false;
    const float width = combo_width(t);
    same_line_if_fits(width + ImGui::GetStyle().ItemInnerSpacing.x + ImGui::CalcTextSize(label).x);
    ImGui::SetNextItemWidth(width);
    if (ImGui::BeginCombo(label, t.runs[index].name.c_str())) {
      for (int i = 0; i < (int)t.runs.size(); ++i)
        if (ImGui::Selectable(t.runs[i].name.c_str(), i == index)) index = i, changed = true;
      ImGui::EndCombo();
    }
    return changed;
  }

  // The budget the sink-pair button simulates at when the trace has no complete pair.
  static int sink_budget(const TraceSnapshot& t) { return std::clamp(t.meta.prompt_len / 4, 8, 256); }

  // One click: StreamingLLM without sinks (A) against with sinks (B), of one budget and one kind
  // (find_sink_pair), the missing ones simulated at the button's budget.
  void sink_button(AppState& app) {
    const SinkPair p = find_sink_pair(app.trace->runs, sink_budget(*app.trace));
    if (want_sink_pair_ && p.complete()) {
      app.run_a = p.none;
      app.run_b = p.with;
      want_sink_pair_ = false;
    }
    const std::string label = "StreamingLLM: no sinks vs sinks, budget " + std::to_string(p.budget);
    same_line_if_fits(button_width(label.c_str()));
    ImGui::BeginDisabled(app.engine.busy());
    if (ImGui::Button(label.c_str())) {
      want_sink_pair_ = true;
      if (!p.complete()) submit_simulation(app, sink_pair_missing_specs(p), p.budget);
    }
    ImGui::EndDisabled();
    if (ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled)) {
      if (p.complete())
        ImGui::SetTooltip("Shows %s (A) against %s (B): the same budget, both %s.", app.trace->runs[p.none].name.c_str(),
                          app.trace->runs[p.with].name.c_str(), p.kind.c_str());
      else
        ImGui::SetTooltip("Simulates %s at budget %d, then shows StreamingLLM without sinks (A) against with\n"
                          "sinks (B).", p.none < 0 && p.with < 0 ? "both" : p.none < 0 ? "the run without sinks" : "the run with sinks",
                          p.budget);
    }
  }

  // "StreamingLLM without sinks vs with sinks, budget 32, live free" when A and B are such a pair.
  static void pair_heading(const RunData& a, const RunData& b) {
    if (a.policy != "streamingllm" || b.policy != "streamingllm") return;
    const bool a_sinks = json_number(a.params_json, "sinks", 0) > 0, b_sinks = json_number(b.params_json, "sinks", 0) > 0;
    if (a_sinks == b_sinks) return;
    if (a.budget != b.budget || run_kind(a) != run_kind(b)) {
      ImGui::TextColored(kErrorTextColor, "A and B differ in more than sinks: budget %d %s vs budget %d %s.", a.budget,
                         run_kind(a).c_str(), b.budget, run_kind(b).c_str());
      return;
    }
    const std::string kind = a.eviction == "real" ? "live, " + run_kind(a) : "simulated";
    ImGui::Text("StreamingLLM %s (A) vs %s (B), budget %d, %s", a_sinks ? "with sinks" : "without sinks",
                b_sinks ? "with sinks" : "without sinks", a.budget, kind.c_str());
  }

  void draw_runs(AppState& app) {
    const TraceSnapshot& t = *app.trace;
    sink_button(app);
    if (t.runs.size() < 2) {
      ImGui::TextWrapped("Compare needs two runs in the trace (this one has %d). Simulate policies in the Run view, "
                         "e.g. streamingllm with sinks=0 and with sinks=4, or open a second trace.", (int)t.runs.size());
      return;
    }
    run_combo("A", t, app.run_a);
    run_combo("B", t, app.run_b);
    const RunData& a = t.runs[app.run_a];
    const RunData& b = t.runs[app.run_b];
    pair_heading(a, b);
    if (app.step_unreadable()) {
      unreadable_step_notice(app.step, app.unreadable_message);
    } else if (app.step_data && app.run_a < (int)app.step_data->kept.size() && app.run_b < (int)app.step_data->kept.size() &&
        !app.step_data->kept[app.run_a].empty() && !app.step_data->kept[app.run_b].empty()) {
      const StepSnapshot& s = *app.step_data;
      const int layer = app.per_head_lanes ? app.layer : -1, g = app.per_head_lanes ? app.kv_head() : -1;
      auto lane = [&](int r) {
        const uint8_t* prev = s.kept_prev[r].empty() ? nullptr : s.kept_prev[r].data();
        return build_lane(s.kept[r].data(), prev, t.meta.shape, t.total_len(), s.q_pos, lane_roles(t.runs[r], t.meta.prompt_len), layer, g);
      };
      const LaneCells la = lane(app.run_a), lb = lane(app.run_b);
      // A free run whose text ended before this step has no cache here: no sets to compare.
      const bool a_ended = !run_holds_keys(s.kept[app.run_a]), b_ended = !run_holds_keys(s.kept[app.run_b]);
      diff_ = lane_difference(la, lb);
      int only_a = 0, only_b = 0;
      for (uint8_t d : diff_) only_a += d == 1, only_b += d == 2;
      ImGui::Text("step %d:", s.step);  // the step these sets are of (the selected one once read)
      ImGui::SameLine();
      if (a_ended || b_ended) {
        ImGui::TextColored(kEndedColor, "%s%s: %s", a_ended ? "A" : "B", a_ended && b_ended ? " and B" : "",
                           run_ended_note(s.step).c_str());
      } else {
        ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(kOnlyA), "%d tokens only in A", only_a);
        ImGui::SameLine();
        ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(kOnlyB), "%d only in B", only_b);
        ImGui::SameLine();
        ImGui::TextDisabled("(held by any %s)", app.per_head_lanes ? "of the selected head" : "head");
      }
      lane_legend();  // the strips' colours, as in the Eviction lanes view
      future_legend_chip();
      const float w = ImGui::GetContentRegionAvail().x;
      strip("A", la, nullptr, w, app, a_ended, &a);
      strip("B", lb, nullptr, w, app, b_ended, &b);
      strip("A vs B", la, &diff_, w, app, a_ended || b_ended, nullptr);
      if (!a_ended && !b_ended) {  // the difference strip's own colours
        ImGui::TextDisabled("A vs B:");
        ImGui::SameLine();
        legend_chip("only in A", kOnlyA, true);
        legend_chip("only in B", kOnlyB, false);
        legend_chip("in both", kBoth, false);
        legend_chip("in neither", kNeither, false, true);
      }
      metrics_at_step(t, app.step, a, b);
      run_totals(a, b);
    } else {
      ImGui::TextDisabled("Loading step %d...", app.step);
    }
    // A forced run is fed the recorded tokens: its text is the recording's whatever it predicts.
    auto fed = [](const RunData& r) { return r.eviction != "real" || r.mode == "forced"; };
    ImGui::PushTextWrapPos(0.0f);  // the notes wrap at the panel's edge
    if (a.eviction != "real" && b.eviction != "real")
      ImGui::TextDisabled("Both runs are simulated: they share the recorded text. Re-run live (Run view) to see "
                          "what eviction does to the output.");
    else if (fed(a) && fed(b))
      ImGui::TextDisabled("Neither run chose its tokens (forced re-runs are fed the recorded ones): compare kl and "
                          "top1_agree, or re-run in free mode to see the texts part.");
    ImGui::PopTextWrapPos();
    texts(run_text(t, a), run_text(t, b), a.name, b.name);
  }

  void metrics_at_step(const TraceSnapshot& t, int step, const RunData& a, const RunData& b) {
    if (a.metrics.empty() && b.metrics.empty()) return;
    std::vector<std::string> names;  // union of both runs' metrics, most telling first
    for (const RunData* r : {&a, &b})
      for (const NamedArray& m : r->metrics)
        if (std::find(names.begin(), names.end(), m.name) == names.end()) names.push_back(m.name);
    sort_metric_names(names);
    // In a narrow panel the titles leave out "mean per (layer, KV head)" (their hover says it), so
    // that the runs' columns and names keep their room.
    const ImGuiStyle& style = ImGui::GetStyle();
    const float value_w = std::max({ImGui::CalcTextSize(a.name.c_str()).x, ImGui::CalcTextSize(b.name.c_str()).x,
                                    ImGui::CalcTextSize("not compared").x});
    float title_w = 0;
    for (const std::string& name : names)
      title_w = std::max(title_w, ImGui::CalcTextSize(metric_title(name, true, metric_scale(name, 1024.0), false).c_str()).x);
    const bool short_titles = title_w + 2 * value_w + 6 * style.CellPadding.x > ImGui::GetContentRegionAvail().x;
    if (!ImGui::BeginTable("m", 3, ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_RowBg)) return;
    const std::string head = "metric at step " + std::to_string(step);
    ImGui::TableSetupColumn(head.c_str());
    ImGui::TableSetupColumn(a.name.c_str());
    ImGui::TableSetupColumn(b.name.c_str());
    ImGui::TableHeadersRow();
    for (const std::string& name : names) {
      const NamedArray* ma = find_metric(a, name);
      const NamedArray* mb = find_metric(b, name);
      const std::vector<float> va = ma ? per_step_series(*ma) : std::vector<float>{};
      const std::vector<float> vb = mb ? per_step_series(*mb) : std::vector<float>{};
      const bool per_head = (ma && per_head_metric(*ma)) || (mb && per_head_metric(*mb));
      double max_abs = 0.0;
      for (const auto* v : {&va, &vb})
        if (step < (int)v->size() && std::isfinite((*v)[step])) max_abs = std::max(max_abs, (double)std::fabs((*v)[step]));
      const ValueScale scale = metric_scale(name, max_abs);
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(metric_title(name, per_head && !short_titles, scale, false).c_str());
      if (ImGui::IsItemHovered()) {
        const MetricInfo info = metric_info(name);
        ImGui::SetTooltip("%s%s", *info.what ? info.what : name.c_str(),
                          per_head ? "\nStored per (layer, KV head): the value is the mean over layers and KV heads." : "");
      }
      ImGui::TableNextColumn();
      value_cell(va, step, scale);
      ImGui::TableNextColumn();
      value_cell(vb, step, scale);
    }
    ImGui::EndTable();
  }

  // "cuda, fp16": where a recording or live run ran and what it stored its cache (on cuda its
  // weights too) in; the device alone where the storage type is not recorded, "-" where neither is.
  static std::string engine_text(const std::string& device, const std::string& dtype) {
    if (device.empty()) return "-";
    return dtype.empty() ? device : device + ", " + dtype;
  }

  // The runs' whole-run numbers (where a live run ran and in what, then its scalars: perplexity
  // beside the full cache's, first divergence, KV memory), "-" where a run has none; nothing when
  // neither has any.
  static void run_totals(const RunData& a, const RunData& b) {
    const std::vector<std::string>& order = live_run_scalar_names();  // unknown ones after these
    std::vector<std::string> names;  // union of both runs'; block_size is a setting
    for (const RunData* r : {&a, &b})
      for (const auto& [k, v] : r->scalars)
        if (k != "block_size" && std::find(names.begin(), names.end(), k) == names.end()) names.push_back(k);
    auto rank = [&order](const std::string& n) { return std::find(order.begin(), order.end(), n) - order.begin(); };
    std::stable_sort(names.begin(), names.end(), [&](const std::string& x, const std::string& y) { return rank(x) < rank(y); });
    const bool engines = !a.device.empty() || !b.device.empty();
    if ((names.empty() && !engines) ||
        !ImGui::BeginTable("totals", 3, ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_RowBg))
      return;
    ImGui::TableSetupColumn("whole run");
    ImGui::TableSetupColumn(a.name.c_str());
    ImGui::TableSetupColumn(b.name.c_str());
    ImGui::TableHeadersRow();
    if (engines) {  // a live run's numbers depend on them: fp16 storage moves rows, and so choices
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::TextUnformatted("engine");
      if (ImGui::IsItemHovered()) ImGui::SetTooltip("where the live run ran and what it stored weights and cache in");
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(engine_text(a.device, a.device_dtype).c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(engine_text(b.device, b.device_dtype).c_str());
    }
    auto value = [](const RunData& r, const std::string& name) {
      for (const auto& [k, v] : r.scalars)
        if (k == name) return run_scalar_text(k, v);
      return std::string("-");
    };
    for (const std::string& name : names) {
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(run_scalar_label(name).c_str());
      if (ImGui::IsItemHovered() && *run_scalar_description(name))
        ImGui::SetTooltip("%s: %s", name.c_str(), run_scalar_description(name));
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(value(a, name).c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(value(b, name).c_str());
    }
    ImGui::EndTable();
  }

  static const NamedArray* find_metric(const RunData& r, const std::string& name) {
    for (const NamedArray& m : r.metrics)
      if (m.name == name) return &m;
    return nullptr;
  }

  // A metric's value at `step` in `scale`'s unit; NaN (a free run's comparison after its text
  // left the recording's) as a greyed "not compared".
  static void value_cell(const std::vector<float>& v, int step, const ValueScale& scale) {
    if (v.empty()) {  // a metric the run has none of (a simulated run's kl), as the whole-run table writes it
      ImGui::TextDisabled("-");
      if (ImGui::IsItemHovered()) ImGui::SetTooltip("This run has no such metric (simulated runs have no logits).");
      return;
    }
    if (step >= (int)v.size()) return;
    if (std::isnan(v[step])) {
      ImGui::TextDisabled("not compared");
      if (ImGui::IsItemHovered())
        ImGui::SetTooltip("The run's text differs from the recording's before this step: its prediction here comes\n"
                          "after other tokens, so it is not compared with the full cache's.");
      return;
    }
    ImGui::Text("%.5g%s%s", v[step] / scale.divisor, *scale.unit ? " " : "", scale.unit);
  }

  // One lane (coloured by state) or the difference of two (diff != nullptr), fitted to the width.
  // ended: the run (either run, for the difference) has no cache at the step: a blank strip. run:
  // the run of a lane (its own tokens on hover), nullptr for the difference.
  void strip(const char* label, const LaneCells& lane, const std::vector<uint8_t>* diff, float width, const AppState& app,
             bool ended, const RunData* run) {
    ImGui::TextUnformatted(label);
    ImGui::SameLine(ui_px(60));
    const ImVec2 p = ImGui::GetCursorScreenPos();
    const float w = std::max(width - ui_px(64), ui_px(50)), h = ui_px(14);
    ImGui::InvisibleButton(label, ImVec2(w, h));
    ImDrawList* dl = ImGui::GetWindowDrawList();
    if (ended) {
      dl->AddRectFilled(p, ImVec2(p.x + w, p.y + h), cell_state_color(CellState::kFuture));
      return;
    }
    const int T = (int)lane.state.size();
    const float cw = w / std::max(T, 1);
    for (int i = 0; i < T; ++i) {
      ImU32 c;
      if (diff) c = (*diff)[i] == 1 ? kOnlyA : (*diff)[i] == 2 ? kOnlyB : (*diff)[i] == 3 ? kBoth : kNeither;
      else c = cell_state_color((CellState)lane.state[i]);
      dl->AddRectFilled(ImVec2(p.x + cw * i, p.y), ImVec2(p.x + cw * (i + 1) + (cw < 2 ? 0.5f : -0.5f), p.y + h), c);
    }
    if (ImGui::IsItemHovered()) {
      const int i = std::clamp((int)std::floor((mouse_pixel_center().x - p.x) / cw), 0, std::max(T - 1, 0));
      const std::string own = run ? run_own_token_note(*app.trace, *run, i) : "";
      if (i < T) ImGui::SetTooltip("position %d \"%s\": %s%s%s", i, token_label(app.trace->token_texts[i]).c_str(),
                                   diff ? ((*diff)[i] == 1 ? "only A" : (*diff)[i] == 2 ? "only B" : (*diff)[i] == 3 ? "both" : "neither")
                                        : cell_state_name((CellState)lane.state[i]),
                                   own.empty() ? "" : "\n", own.c_str());
    }
  }

  void draw_traces(AppState& app) {
    // A second trace opened elsewhere (File menu, a script's `compare PATH`) shows its path here.
    if (app.other_trace && other_path_.empty()) other_path_ = app.other_trace->path;
    ImGui::SameLine();
    ImGui::SetNextItemWidth(std::max(ImGui::GetContentRegionAvail().x - ui_px(70), ui_px(100)));
    ImGui::InputText("##other", &other_path_);
    ImGui::SameLine();
    if (ImGui::Button("Open") && !other_path_.empty()) app.open_trace(other_path_, true);
    if (!app.other_trace) {
      ImGui::TextDisabled("Open a second trace (path above, or File > Open > Open as second trace).");
      return;
    }
    const TraceSnapshot& a = *app.trace;
    const TraceSnapshot& b = *app.other_trace;
    if (ImGui::BeginTable("meta", 3, ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_RowBg)) {
      ImGui::TableSetupColumn("");
      ImGui::TableSetupColumn("A (open trace)");
      ImGui::TableSetupColumn("B");
      ImGui::TableHeadersRow();
      auto row = [](const char* k, const std::string& x, const std::string& y) {
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(k);
        ImGui::TableNextColumn();
        if (x != y) ImGui::TextColored(ImVec4(1, 0.8f, 0.3f, 1), "%s", x.c_str());
        else ImGui::TextUnformatted(x.c_str());
        ImGui::TableNextColumn();
        if (x != y) ImGui::TextColored(ImVec4(1, 0.8f, 0.3f, 1), "%s", y.c_str());
        else ImGui::TextUnformatted(y.c_str());
      };
      row("file", a.path, b.path);
      row("model", a.meta.model, b.meta.model);
      // Where each ran and in what (cpu, fp32 | cuda, fp16 ...): 16-bit storage moves the rows.
      row("engine", engine_text(a.meta.device, a.meta.device_dtype), engine_text(b.meta.device, b.meta.device_dtype));
      row("prompt tokens", std::to_string(a.meta.prompt_len), std::to_string(b.meta.prompt_len));
      row("steps", std::to_string(a.n_steps()), std::to_string(b.n_steps()));
      auto number = [](double v) {  // 0 and 0.7, not 0.000000 and 0.700000
        char buf[32];
        std::snprintf(buf, sizeof buf, "%g", v);
        return std::string(buf);
      };
      row("temperature", number(a.meta.temperature), number(b.meta.temperature));
      row("runs", std::to_string(a.runs.size()), std::to_string(b.runs.size()));
      ImGui::EndTable();
    }
    const long tok = first_divergence(a.token_ids, b.token_ids);
    if (tok >= 0) ImGui::Text("token sequences first differ at position %ld", tok);
    else ImGui::Text("identical token sequences");
    draw_row_diff(app);
    texts(a.generated_text, b.generated_text, "A", "B");
  }

  // The traces' decode rows compared (diff_decode_rows) in the background once per pair opened:
  // the largest difference and where, the share of rows within 1e-3, and the largest a step.
  void draw_row_diff(AppState& app) {
    if (row_diff_->generation != app.generation) {
      row_diff_->generation = app.generation;
      row_diff_->diff.reset();
      const int generation = app.generation;
      auto slot = row_diff_;
      auto ra = app.reader, rb = app.other_reader;
      auto job = [&app, slot, ra, rb, generation](JobContext&) {
        RowDiff d;
        try {
          d = diff_decode_rows(*ra, *rb);
        } catch (const std::exception& e) {  // a damaged step: said where the result would be
          d = RowDiff{};
          d.why_not = e.what();
        }
        app.engine.post([slot, diff = std::make_shared<const RowDiff>(std::move(d)), generation] {
          if (slot->generation == generation) slot->diff = diff;
        });
      };
      app.engine.submit("row-diff", "Comparing the traces' attention rows", job);
      if (app.headless) {
        app.engine.wait_idle();
        app.engine.drain();
      }
    }
    const RowDiff* d = row_diff_->diff.get();
    if (!d) {
      ImGui::TextDisabled("comparing the attention rows...");
    } else if (!d->why_not.empty()) {
      ImGui::TextDisabled("attention rows not compared: %s", d->why_not.c_str());
    } else if (d->steps() == 0) {
      ImGui::TextDisabled("attention rows: no decode step with the same tokens in both");
    } else if (d->max == 0.0f) {
      ImGui::Text("attention rows, %d steps: identical", d->steps());
    } else {
      ImGui::Text("attention rows, %d steps: largest difference %.2g (step %d, layer %d, head %d, key %d); "
                  "%.2f%% of %ld rows within %g",
                  d->steps(), d->max, d->worst_step, d->worst_layer, d->worst_head, d->worst_key,
                  100.0 * d->rows_within / d->rows, d->rows, d->tol);
      if (ImGui::IsItemHovered())
        ImGui::SetTooltip("Each decode step's rows of A against B's over the keys up to its query, while both\n"
                          "traces fed the same tokens; a row counts as within when its largest difference is.\n"
                          "fp16 or bf16 storage on a GPU moves rows by up to about 1e-2; fp32 by about 1e-5.");
      if (d->steps() > 1) {
        ImGui::PlotLines("##stepmax", d->step_max.data(), d->steps(), 0, "largest difference a step", 0.0f, d->max,
                         ImVec2(ImGui::GetContentRegionAvail().x, ui_px(40)));
      }
    }
  }

  // Both texts with the common prefix plain, the first differing character onwards highlighted.
  void texts(const std::string& a, const std::string& b, const std::string& name_a, const std::string& name_b) {
    const long d = first_text_divergence(a, b);
    ImGui::Separator();
    if (d < 0) ImGui::TextDisabled("generated texts are identical");
    else ImGui::Text("generated texts first differ at character %ld", d);
    const float half = ImGui::GetContentRegionAvail().x * 0.5f - 4;
    const float h = std::max(ImGui::GetContentRegionAvail().y, 60.0f);
    one_text("ta", name_a, a, d, half, h, kOnlyA);
    ImGui::SameLine();
    one_text("tb", name_b, b, d, half, h, kOnlyB);
  }

  void one_text(const char* id, const std::string& name, const std::string& text, long d, float w, float h, ImU32 color) {
    ImGui::BeginChild(id, ImVec2(w, h), true);
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(color), "%s", name.c_str());
    ImGui::PushTextWrapPos(0.0f);
    if (d < 0 || d >= (long)text.size()) {
      ImGui::TextUnformatted(text.c_str());
    } else {
      ImGui::TextUnformatted(text.c_str(), text.c_str() + d);
      ImGui::TextColored(ImVec4(1.0f, 0.4f, 0.35f, 1.0f), ">> diverges here:");
      ImGui::TextColored(ImVec4(1.0f, 0.75f, 0.5f, 1.0f), "%s", text.c_str() + d);
    }
    ImGui::PopTextWrapPos();
    ImGui::EndChild();
  }

  int mode_ = 0;
  bool want_sink_pair_ = false;  // select the StreamingLLM pair once it is in the trace
  std::string other_path_;
  std::vector<uint8_t> diff_;  // [T] 1 only A, 2 only B, 3 both
  // The row comparison of the open pair, filled by the engine worker; shared with its job.
  struct RowDiffSlot {
    int generation = -1;  // the app's generation it was asked for
    std::shared_ptr<const RowDiff> diff;
  };
  std::shared_ptr<RowDiffSlot> row_diff_ = std::make_shared<RowDiffSlot>();
};

}  // namespace

std::unique_ptr<View> make_compare_view() { return std::make_unique<CompareView>(); }

}  // namespace kvs
