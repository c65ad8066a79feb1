// Run: pick a model and a prompt (demo prompts from assets/prompts), sampling, device and
// policies with their parameters and budget; Record a new trace (optionally enforcing one policy
// live) or Simulate the chosen policies on the open trace, in the background with progress,
// Cancel, and the output text streaming as it decodes.
#include <imgui.h>
#include <imgui_stdlib.h>

#include <algorithm>
#include <cfloat>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <fstream>
#include <mutex>
#include <optional>
#include <sstream>
#include <tuple>

#include "analysis/policy.h"
#include "analysis/policy_omnikv.h"
#include "app/cli/device_flag.h"
#include "app/cli/policy_setup.h"
#include "app/cli/rerun.h"
#include "app/cli/record.h"
#include "app/gui/fonts.h"
#include "app/gui/jobs.h"
#include "app/gui/replace_confirm.h"
#include "app/gui/script.h"
#include "app/gui/widgets.h"
#include "app/views/view.h"
#include "inference/chat_template.h"
#include "inference/cuda_backend.h"
#include "inference/errors.h"
#include "inference/host_memory.h"
#include "inference/loader.h"

namespace kvs {
namespace {

struct PolicyRow {
  std::string name;
  bool enabled = false;
  std::string params;  // "key=value,key=value"
};

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();  // prompts end mid-sentence
  return text;
}

constexpr float kMinOutBox = 200.0f;       // narrowest output-path box beside the buttons (ui_px)
constexpr float kMinSystemBox = 200.0f;     // narrowest named system-prompt box beside the chat format (ui_px)
constexpr float kMinBareSystemBox = 110.0f;  // the same without its name (ui_px)
constexpr float kModeComboWidth = 80.0f;  // Re-run's forced / free (ui_px)

class RunView : public View {
 public:
  explicit RunView(const std::string& model_path) : model_path_(model_path) {
    const std::filesystem::path prompts = std::filesystem::path(assets_dir()) / "prompts";
    for (const char* name : {"sink", "passkey", "two_stage_retrieval", "story"}) {
      const auto p = prompts / (std::string(name) + ".txt");
      if (std::filesystem::exists(p)) demos_.push_back({name, read_file(p)});
    }
    if (!demos_.empty()) prompt_ = demos_.front().second;
    for (const std::string& n : policy_names()) policies_.push_back(PolicyRow{n, n == "streamingllm" || n == "h2o", ""});
    if (model_path_.empty()) {
      const auto models = candidate_models();
      if (!models.empty()) model_path_ = models.front();
    }
  }

  const char* id() const override { return "run"; }
  const char* title() const override { return "Run"; }

  void draw(AppState& app) override {
    follow_open_trace(app);
    drain_stream();
    update_chat_template();
    // The settings scroll in a region of their own when the panel is short (a projector's
    // 1280x720 tiles), so that Record, Simulate, Re-run and the output stay in view below them;
    // the region is as tall as the settings (last frame's) when they fit.
    const float line = ImGui::GetFrameHeightWithSpacing();
    const float output_min = 3 * ImGui::GetTextLineHeightWithSpacing() + 2 * ImGui::GetStyle().WindowPadding.y;
    const float footer_h = actions_h_ + ImGui::GetTextLineHeightWithSpacing() + output_min;
    const float panel_h = ImGui::GetContentRegionAvail().y;
    const float room = std::max(panel_h - footer_h, 2 * line);
    ImGui::BeginChild("##settings", ImVec2(0, settings_region_h(room)));
    row_ends_now_.clear();
    model_picker(app);
    row_end();
    prompt_editor();
    sampling_and_device();
    row_end();
    policy_table(app, panel_h);
    settings_h_ = ImGui::GetCursorPosY();
    row_ends_.swap(row_ends_now_);
    ImGui::EndChild();
    const float actions_top = ImGui::GetCursorPosY();
    actions(app);
    actions_h_ = ImGui::GetCursorPosY() - actions_top;
    output();
    if (replace_.draw()) record(app);
  }

  CsvTable csv(const AppState& app) const override {
    CsvTable c;
    c.header = {"field", "value"};
    c.add({"model", model_path_});
    c.add({"prompt", prompt_});
    c.add({"chat_format", chat_choice_.value_or(!chat_template_for_path(model_path_).empty()) ? "on" : "off"});
    c.add({"system", system_});
    c.add({"steps", std::to_string(steps_)});
    c.add({"temperature", csv_number(temperature_)});
    c.add({"top_p", csv_number(top_p_)});
    c.add({"seed", std::to_string(seed_)});
    c.add({"budget", std::to_string(budget_)});
    for (const PolicyRow& p : policies_)
      if (p.enabled) c.add({"policy", p.name + (p.params.empty() ? "" : ":" + p.params)});
    c.add({"output", output_});
    return c;
  }

  bool command(AppState& app, const std::string& verb, const std::string& arg) override {
    follow_open_trace(app);  // a trace opened since the last frame, before a setting changes it
    if (verb == "demo") {
      std::string names;
      for (auto& [name, text] : demos_) {
        if (name == arg) {
          prompt_ = text;
          return true;
        }
        names += (names.empty() ? "" : ", ") + name;
      }
      throw script_error(verb, arg, "names no demo prompt (" + names + ")");
    }
    if (verb == "simulate" || verb == "rerun") script_trace(app, verb, arg);
    if (verb == "budget") budget_ = script_int(verb, arg, 1, 1 << 30);
    else if (verb == "model") model_path_ = arg;
    else if (verb == "chat") chat_choice_ = script_choice(verb, arg, {"on", "off"}) == "on";
    else if (verb == "prompt") prompt_ = arg;
    else if (verb == "system") system_ = arg;
    else if (verb == "steps") steps_ = script_int(verb, arg, 1, 1 << 16);
    else if (verb == "out") out_path_ = arg;
    else if (verb == "policies") set_policies(verb, arg);
    else if (verb == "record") {
      if (const std::string why = out_problem(app); !why.empty()) throw script_error(verb, arg, why);
      std::error_code ec;
      if (std::filesystem::exists(out_path_, ec))
        throw script_error(verb, arg, ": " + out_path_ + " exists; name another with 'out PATH' (a script does not replace files)");
      record(app);
    }
    else if (verb == "simulate") simulate_on_trace(app);
    else if (verb == "rerun") rerun_live(app);
    else if (verb == "mode" && (arg == "forced" || arg == "free")) rerun_mode_ = arg == "free" ? 1 : 0;  // Compare takes runs/traces
    else if (verb == "device") choose_device(app, arg);
    else if (verb == "gpu-dtype") choose_gpu_dtype(arg);
    else if (verb == "kv-dtype") choose_kv_dtype(arg);
    else return false;
    return true;
  }

 private:
  std::vector<std::string> candidate_models() const {
    std::vector<std::string> out;
    const std::string def = default_model_path();
    if (!def.empty()) out.push_back(def);
    const std::filesystem::path shared = std::filesystem::path(assets_dir()).parent_path().parent_path() / "shared" / "models";
    for (const char* rel : {"stories260K/stories260K.bin", "stories260K.gguf", "stories260K/stories260K.gguf",
                            "fixtures/llama-2-tiny-random.gguf"}) {
      const auto p = shared / rel;
      if (std::filesystem::exists(p)) out.push_back(std::filesystem::weakly_canonical(p).string());
    }
    return out;
  }

  void model_picker(AppState& app) {
    ImGui::SetNextItemWidth(std::max(ImGui::GetContentRegionAvail().x - ui_px(90), ui_px(100)));
    ImGui::InputText("##model", &model_path_);
    ImGui::SameLine();
    if (ImGui::BeginCombo("model", "", ImGuiComboFlags_NoPreview)) {
      const auto found = candidate_models();
      if (!found.empty()) ImGui::TextDisabled("found");
      // A model picked here gets its own chat-format default (on when it has a chat format).
      for (const std::string& m : found)
        if (ImGui::Selectable(m.c_str())) model_path_ = m, chat_choice_.reset();
      if (!app.recent_models.items().empty()) ImGui::TextDisabled("recent");
      for (const std::string& m : app.recent_models.items())
        if (ImGui::Selectable(m.c_str())) model_path_ = m, chat_choice_.reset();
      if (found.empty() && app.recent_models.items().empty()) ImGui::TextDisabled("no model found; type a path");
      ImGui::EndCombo();
    }
  }

  void prompt_editor() {
    ImGui::SetNextItemWidth(ui_px(170));
    if (ImGui::BeginCombo("##demo", "demo prompt...")) {
      for (auto& [name, text] : demos_)
        if (ImGui::Selectable(name.c_str())) prompt_ = text;
      ImGui::EndCombo();
    }
    ImGui::SameLine();
    bool chat = chat_on();
    ImGui::BeginDisabled(!has_chat_template_ && !chat);
    if (ImGui::Checkbox("chat format", &chat)) chat_choice_ = chat;
    ImGui::EndDisabled();
    const bool chat_hovered = ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled);
    if (chat_hovered)
      ImGui::SetTooltip("%s", !has_chat_template_
                                  ? "This model has no chat template (a base model): the prompt is given as it is."
                                  : "Wrap the prompt in the model's chat template, rendered as transformers renders "
                                    "it (on by default for a model that has one: an Instruct model given the raw "
                                    "text often ends it at once).");
    // With the chat format on, a system turn may go before the prompt (as `record --system`).
    // It takes the rest of the row, named "system" where kMinSystemBox is left, unnamed (its hint
    // says what it is) where kMinBareSystemBox is, else a row of its own: in the overview's Run
    // tile a row more hid the prompt.
    if (chat) {
      const float label_w = ImGui::CalcTextSize("system").x + ImGui::GetStyle().ItemInnerSpacing.x;
      const bool named = same_line_if_fits(ui_px(kMinSystemBox) + label_w);
      const bool bare = !named && same_line_if_fits(ui_px(kMinBareSystemBox));
      if (!named && !bare) row_end();
      ImGui::SetNextItemWidth(bare ? -1 : -label_w);
      ImGui::InputTextWithHint(bare ? "##system" : "system",
                               bare ? "system prompt" : "none: the template's default system turn, if any", &system_);
      if (ImGui::IsItemHovered())
        ImGui::SetTooltip("A system turn before the prompt, in the model's chat template (as record --system); "
                          "left empty, the template writes its own default, if it has one.");
    }
    row_end();
    // The prompt wraps at the box's width; a click edits it (ImGui's multiline input box does not
    // wrap: while editing, long lines scroll sideways).
    const ImVec2 box(-1, ImGui::GetTextLineHeight() * 5 + ImGui::GetStyle().FramePadding.y * 2);
    if (editing_prompt_) {
      if (focus_prompt_) ImGui::SetKeyboardFocusHere(), focus_prompt_ = false;
      ImGui::InputTextMultiline("##prompt", &prompt_, box);
      if (ImGui::IsItemDeactivated()) editing_prompt_ = false;
    } else {
      ImGui::PushStyleColor(ImGuiCol_ChildBg, ImGui::GetStyleColorVec4(ImGuiCol_FrameBg));
      ImGui::BeginChild("##prompt_wrapped", box, true);
      ImGui::PushTextWrapPos(0.0f);
      ImGui::TextUnformatted(prompt_.empty() ? " " : prompt_.c_str());
      ImGui::PopTextWrapPos();
      const bool clicked = ImGui::IsWindowHovered() && ImGui::IsMouseClicked(0);
      if (ImGui::IsWindowHovered()) ImGui::SetMouseCursor(ImGuiMouseCursor_TextInput);
      ImGui::EndChild();
      ImGui::PopStyleColor();
      if (clicked) editing_prompt_ = focus_prompt_ = true;
    }
    row_end();
  }

  // Where a row of the settings ends (the next one's top), for settings_region_h.
  void row_end() { row_ends_now_.push_back(ImGui::GetCursorPosY()); }

  // The settings region's height: all of them where they fit in `room`, else `room`, less the
  // row it cuts where under 60% of that row would show (a row's top pixels under the prompt box,
  // cut mid-widget, looked broken), from last frame's rows.
  float settings_region_h(float room) const {
    if (settings_h_ <= room) return settings_h_;
    float start = 0.0f, next = settings_h_;  // the row `room` cuts: from start to next
    for (float end : row_ends_) {
      if (end <= room) start = std::max(start, end);
      else next = std::min(next, end);
    }
    const bool sliver = room - start < 0.6f * (next - start);
    return sliver && start >= 2 * ImGui::GetFrameHeightWithSpacing() ? start : room;
  }

  // The chat format's default follows the model: on when its file holds a chat template.
  void update_chat_template() {
    if (model_path_ == chat_template_for_) return;
    chat_template_for_ = model_path_;
    has_chat_template_ = !chat_template_for_path(model_path_).empty();
  }
  bool chat_on() const { return chat_choice_.value_or(has_chat_template_); }

  void sampling_and_device() {
    ImGui::SetNextItemWidth(ui_px(80));
    ImGui::InputInt("steps", &steps_, 0);
    steps_ = std::clamp(steps_, 1, 1 << 16);
    ImGui::SameLine();
    ImGui::SetNextItemWidth(ui_px(70));
    // Values typed in (double-click) stay in range too: out of it, Record failed on --temperature or
    // --top-p, flags the Run view does not show.
    ImGui::DragFloat("temp", &temperature_, 0.01f, 0.0f, 2.0f, "%.2f", ImGuiSliderFlags_AlwaysClamp);
    ImGui::SameLine();
    ImGui::SetNextItemWidth(ui_px(70));
    ImGui::DragFloat("top-p", &top_p_, 0.01f, 0.01f, 1.0f, "%.2f", ImGuiSliderFlags_AlwaysClamp);
    ImGui::SameLine();
    ImGui::SetNextItemWidth(ui_px(70));
    ImGui::InputInt("seed", &seed_, 0);
    const ImGuiStyle& style = ImGui::GetStyle();
    same_line_if_fits(radio_width("CPU") + style.ItemSpacing.x + radio_width("CUDA"));
    int device = device_ == Device::Cuda ? 1 : 0;
    ImGui::RadioButton("CPU", &device, 0);
    ImGui::SameLine();
    ImGui::BeginDisabled(!cuda_ok_);
    ImGui::RadioButton("CUDA", &device, 1);
    ImGui::EndDisabled();
    if (!cuda_ok_ && ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled)) ImGui::SetTooltip("%s", cuda_why_.c_str());
    device_ = device == 1 && cuda_ok_ ? Device::Cuda : Device::Cpu;
    // The storage type of the chosen device: on a GPU weights and cache (as --gpu-dtype: auto =
    // fp32 for small models, bf16 for bf16 checkpoints, fp16 otherwise), on the CPU the cache (as
    // --kv-dtype).
    if (device_ == Device::Cuda) {
      storage_combo("GPU dtype", gpu_dtype_, {GpuDtype::Auto, GpuDtype::Fp16, GpuDtype::Bf16, GpuDtype::Fp32},
                    gpu_dtype_name,
                    "GPU weights and KV cache: fp32 = the CPU's attention to ~1e-5, twice the memory of fp16; "
                    "auto = fp32 for models up to 268M weights (their decode waits on kernel launches, not on "
                    "bytes), else bf16 for bf16 checkpoints (no overflow past 65504), fp16 for the rest (three "
                    "more mantissa bits). Opening a trace recorded on a GPU sets it to the recording's.");
    } else {
      storage_combo("KV cache", kv_dtype_, {KvDtype::Fp32, KvDtype::Fp16, KvDtype::Bf16}, kv_dtype_name,
                    "What the CPU stores keys and values in: fp32 = exact; fp16 and bf16 take half the memory "
                    "and decode long contexts faster, attention rows moving by up to about 5e-3 (fp16) or 5e-2 "
                    "(bf16). Opening a trace sets it to the recording's, so that Re-run live holds the same "
                    "numbers.");
    }
  }

  // A narrow combo `label` choosing `value` among `choices` (each shown as name(choice)), on the
  // row where it fits, `tip` on hover.
  template <class T>
  static void storage_combo(const char* label, T& value, std::initializer_list<T> choices, const char* (*name)(T),
                            const char* tip) {
    same_line_if_fits(ui_px(70) + ImGui::GetStyle().ItemInnerSpacing.x + ImGui::CalcTextSize(label).x);
    ImGui::SetNextItemWidth(ui_px(70));
    if (ImGui::BeginCombo(label, name(value))) {
      for (T d : choices)
        if (ImGui::Selectable(name(d), d == value)) value = d;
      ImGui::EndCombo();
    }
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", tip);
  }

  // A newly opened trace sets the storage to its recording's (recorded_storage, as `kvscope
  // rerun` defaults to), so that Re-run live holds the numbers its rows came from; the combos
  // show it and change it. A CPU recording leaves the GPU's choice as it was.
  void follow_open_trace(const AppState& app) {
    if (!app.trace || app.trace->path == storage_from_) return;
    storage_from_ = app.trace->path;
    const RecordedStorage recorded = recorded_storage(app.trace->meta);
    kv_dtype_ = recorded.kv;
    if (app.trace->meta.device == "cuda") gpu_dtype_ = recorded.gpu;
  }

  // Script command `gpu-dtype auto|fp16|bf16|fp32` (as --gpu-dtype).
  void choose_gpu_dtype(const std::string& value) {
    const auto d = parse_gpu_dtype(value);
    if (!d) throw input_error("--script", "'gpu-dtype " + value + "' expects auto, fp16, bf16 or fp32");
    gpu_dtype_ = *d;
  }

  // Script command `kv-dtype fp32|fp16|bf16` (as --kv-dtype; used on the CPU).
  void choose_kv_dtype(const std::string& value) {
    const auto d = parse_kv_dtype(value);
    if (!d) throw input_error("--script", "'kv-dtype " + value + "' expects fp32, fp16 or bf16");
    kv_dtype_ = *d;
  }

  // Script command `device cpu|cuda`: CUDA where usable, else a notice and the CPU (as --device).
  void choose_device(AppState& app, const std::string& value) {
    if (value != "cpu" && value != "cuda") throw input_error("--script", "'device " + value + "' expects cpu or cuda");
    device_ = value == "cuda" && cuda_ok_ ? Device::Cuda : Device::Cpu;
    if (value == "cuda" && !cuda_ok_) app.info("CUDA: " + cuda_why_ + "; running on the CPU");
  }

  // The parameters a policy resolves to when none is set, "key=value,...", for the open trace
  // (its shape, OmniKV's filter layers chosen on its similarity, DuoAttention's gates estimated on
  // the model when it holds them) and this budget: the hint of an
  // empty parameter box. Empty without a trace, or when the policy needs more to be made.
  std::string default_params(const std::string& name, const AppState& app) const {
    if (!app.trace) return "";
    try {
      PolicySpec spec{name, {}, budget_};
      if (name == "omnikv") resolve_omnikv_spec(spec, TraceReader(app.trace->path));
      if (name == "duoattention") choose_duo_gates(spec, TraceReader(app.trace->path), "");
      return resolved_params_text(spec, app.trace->meta.shape);
    } catch (const std::exception&) {
      return "";
    }
  }

  // panel_h: the panel's height below its top, of which the settings above took GetCursorPosY().
  void policy_table(const AppState& app, float panel_h) {
    ImGui::SetNextItemWidth(ui_px(80));
    ImGui::InputInt("budget (tokens per head)", &budget_, 0);
    budget_ = std::max(budget_, 1);
    const char* live_label = "enforce first checked policy live when recording";
    same_line_if_fits(radio_width(live_label));  // a checkbox is as wide as a radio button
    ImGui::Checkbox(live_label, &record_live_);
    row_end();
    // Every row when the window is tall enough, else as many as half the space left (the output
    // below takes the rest), at least a few.
    const float rows_h = ImGui::GetFrameHeightWithSpacing() * (policies_.size() + 1.2f);
    const float h = std::min(rows_h, std::max((panel_h - ImGui::GetCursorPosY()) * 0.5f, 150.0f));
    const auto hint_key = std::make_tuple(budget_, app.trace ? app.trace->path : std::string(), policies_.size());
    if (hint_key != hint_key_) {
      hint_key_ = hint_key;
      hints_.clear();
      for (const PolicyRow& p : policies_) hints_.push_back(default_params(p.name, app));
    }
    if (!ImGui::BeginTable("policies", 2, ImGuiTableFlags_ScrollY | ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerV,
                           ImVec2(0, h)))
      return;
    ImGui::TableSetupColumn("policy", ImGuiTableColumnFlags_WidthFixed, 130);
    ImGui::TableSetupColumn("parameters (key=value,...; empty = defaults)");
    ImGui::TableHeadersRow();
    int duplicate = -1;  // row to copy after the loop (another configuration of that policy)
    for (int i = 0; i < (int)policies_.size(); ++i) {
      PolicyRow& p = policies_[i];
      ImGui::PushID(i);
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::Checkbox(p.name.c_str(), &p.enabled);
      ImGui::TableNextColumn();
      if (ImGui::SmallButton("+")) duplicate = i;
      if (ImGui::IsItemHovered()) ImGui::SetTooltip("add another configuration of %s", p.name.c_str());
      ImGui::SameLine();
      ImGui::SetNextItemWidth(-1);
      ImGui::InputTextWithHint("##params", hints_[i].c_str(), &p.params);
      if (ImGui::IsItemHovered() && p.params.empty() && !hints_[i].empty())
        ImGui::SetTooltip("defaults for this trace and budget: %s", hints_[i].c_str());
      ImGui::PopID();
    }
    ImGui::EndTable();
    if (duplicate >= 0) policies_.insert(policies_.begin() + duplicate + 1, PolicyRow{policies_[duplicate].name, true, ""});
  }

  // "streamingllm|h2o:heavy=8,recent=8": checks exactly these policies, with these parameters.
  void set_policies(const std::string& verb, const std::string& list) {
    std::stringstream names(list);
    for (std::string item; std::getline(names, item, '|');) {
      const std::string name = item.substr(0, item.find(':'));
      if (std::none_of(policies_.begin(), policies_.end(), [&](const PolicyRow& p) { return p.name == name; }))
        throw script_error(verb, list, "names an unknown policy '" + name + "'");
    }
    for (PolicyRow& p : policies_) p.enabled = false, p.params.clear();
    std::stringstream ss(list);
    for (std::string item; std::getline(ss, item, '|');) {
      const size_t colon = item.find(':');
      const std::string name = item.substr(0, colon), params = colon == std::string::npos ? "" : item.substr(colon + 1);
      auto row = std::find_if(policies_.begin(), policies_.end(), [&](const PolicyRow& p) { return p.name == name && !p.enabled; });
      if (row == policies_.end()) {  // a second configuration of the same policy
        auto same = std::find_if(policies_.begin(), policies_.end(), [&](const PolicyRow& p) { return p.name == name; });
        row = policies_.insert(same + 1, PolicyRow{name, false, ""});
      }
      row->enabled = true;
      row->params = params;
    }
  }

  std::vector<std::string> chosen_specs() const {
    std::vector<std::string> out;
    for (const PolicyRow& p : policies_)
      if (p.enabled) out.push_back(p.name + (p.params.empty() ? "" : ":" + p.params));
    return out;
  }

  void actions(AppState& app) {
    const bool busy = app.engine.busy();
    ImGui::BeginDisabled(busy);
    if (ImGui::Button("Record")) {
      if (const std::string why = out_problem(app); !why.empty()) app.error("Record: " + why);
      else if (replace_.clear_to_write(out_path_)) record(app);
    }
    ImGui::BeginDisabled(!app.trace);
    same_line_if_fits(button_width("Simulate on open trace"));  // a narrow panel wraps the row
    if (ImGui::Button("Simulate on open trace")) simulate_on_trace(app);
    if (ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
      ImGui::SetTooltip("Replay the checked policies over the open trace's recorded attention (as kvscope simulate)\n"
                        "and append them as runs to the trace file itself (rewritten whole, then renamed over it;\n"
                        "a run of the same name is replaced).");
    same_line_if_fits(button_width("Re-run live") + ImGui::GetStyle().ItemSpacing.x + ui_px(kModeComboWidth));
    if (ImGui::Button("Re-run live")) rerun_live(app);
    if (ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
      ImGui::SetTooltip("Enforce the checked policies inside the engine on the open trace's model and prompt\n"
                        "(real eviction), appended as runs with their own text and KL to the full cache.");
    ImGui::SameLine();
    ImGui::SetNextItemWidth(ui_px(kModeComboWidth));
    ImGui::Combo("##mode", &rerun_mode_, "forced\0free\0");
    ImGui::EndDisabled();
    ImGui::EndDisabled();
    // The output path beside the buttons when a readable box fits there, else on a row of its own.
    const float label_w = ImGui::GetStyle().ItemInnerSpacing.x + ImGui::CalcTextSize("out").x;
    same_line_if_fits(ui_px(kMinOutBox) + label_w);
    ImGui::SetNextItemWidth(std::max(ImGui::GetContentRegionAvail().x - label_w, 80.0f));
    ImGui::InputText("out", &out_path_);
    if (busy) {
      ImGui::ProgressBar(app.engine.progress(), ImVec2(std::max(ImGui::GetContentRegionAvail().x - ui_px(70), ui_px(50)), 0),
                         app.engine.running_label().c_str());
      ImGui::SameLine();
      if (ImGui::Button("Cancel")) app.engine.cancel_all();
    }
  }

  // Why the output path cannot take a recording ("" when it can): the open trace would be lost.
  std::string out_problem(const AppState& app) const {
    std::error_code ec;
    if (app.trace && std::filesystem::equivalent(out_path_, app.trace->path, ec))
      return out_path_ + " is the open trace; choose another output";
    return "";
  }

  void record(AppState& app) {
    RecordRequest req;
    req.model_path = model_path_;
    req.prompt = prompt_;
    update_chat_template();  // a script's `model PATH` is not drawn before its `record`
    req.chat = chat_on();
    if (req.chat) req.system = system_;
    req.steps = steps_;
    req.sampling.temperature = temperature_;
    req.sampling.top_p = top_p_;
    req.sampling.seed = (uint64_t)seed_;
    req.out_path = out_path_;
    req.device = device_;
    req.gpu_dtype = gpu_dtype_;
    if (device_ == Device::Cpu) req.kv_dtype = kv_dtype_;
    const auto specs = chosen_specs();
    if (record_live_ && !specs.empty()) {
      req.policy = specs.front();
      req.budget = budget_;
    }
    output_.clear();
    {
      std::lock_guard<std::mutex> lock(stream_mu_);
      stream_.clear();
    }
    if (!app.headless) app.recent_models.add(std::filesystem::absolute(model_path_).string());
    app.engine.submit("engine", "Recording " + out_path_, [this, &app, req](JobContext& ctx) {
      RecordCallbacks cb;
      cb.on_token = [this, &ctx](int step, int total, const std::string& piece) {
        ctx.progress(total > 0 ? (float)(step + 1) / (float)total : 0.0f);
        std::lock_guard<std::mutex> lock(stream_mu_);
        stream_ += piece;
      };
      cb.on_prefill_layer = [&ctx](int layer, int n_layers) {  // the bar fills once for the prompt
        ctx.progress(n_layers > 0 ? (float)layer / (float)n_layers : 0.0f);
      };
      // Under a policy the full-cache reference (and KVzip's scoring) run first: each pass's
      // prefill, then its steps, likewise.
      cb.on_pass = [&ctx](const PassProgress& p) { ctx.progress(p.total > 0 ? (float)p.done / (float)p.total : 0.0f); };
      cb.cancelled = [&ctx] { return ctx.cancelled(); };
      try {
        const RecordResult r = record_trace(req, cb);
        app.engine.post([this, &app, r, req] {
          {  // the whole text replaces the streamed pieces, drained or not (they were shown twice)
            std::lock_guard<std::mutex> lock(stream_mu_);
            stream_.clear();
          }
          output_ = r.prompt_text + r.generated_text;
          if (r.out_path.empty()) {
            app.info("Recording " + r.note);
            return;
          }
          app.info("Recorded " + r.out_path + " (" + timing_summary(r) + ")" + (r.note.empty() ? "" : "; " + r.note));
          app.open_trace(r.out_path, false);
        });
      } catch (const std::exception& e) {
        const std::string message = error_text(e);
        app.engine.post([&app, message] { app.error(message); });
      }
    });
    if (app.headless) {  // scripted recording: finish before the screenshot
      app.engine.wait_idle();
      app.engine.drain();
    }
  }

  // A live re-run on the engine worker (it loads the trace's model); the trace is reopened after.
  void rerun_live(AppState& app) {
    const auto specs = chosen_specs();
    if (!app.trace) {
      app.error("Re-run: open a trace first");
      return;
    }
    if (specs.empty()) {
      app.error("Re-run: check at least one policy");
      return;
    }
    follow_open_trace(app);  // a script's `rerun PATH` opened it just now
    ArgList args = {app.trace->path, "--mode", rerun_mode_ ? "free" : "forced", "--device", device_name(device_)};
    if (device_ != Device::Cpu)  // --device cpu refuses a --gpu-dtype, cuda a --kv-dtype
      args.insert(args.end(), {"--gpu-dtype", gpu_dtype_name(gpu_dtype_)});
    else
      args.insert(args.end(), {"--kv-dtype", kv_dtype_name(kv_dtype_)});
    for (const std::string& s : specs) args.insert(args.end(), {"--policy", s});
    // The budget box, for the policies that take it (full keeps everything; OmniKV's frac=F and a
    // spec's budget=N are their own): rerun refuses a --budget nothing uses.
    if (std::any_of(specs.begin(), specs.end(), takes_budget_flag)) args.insert(args.end(), {"--budget", std::to_string(budget_)});
    output_.clear();
    app.engine.submit("engine", "Re-running " + std::to_string(specs.size()) + " policies live", [this, &app, args](JobContext& ctx) {
      try {
        RerunCallbacks cb;
        // The bar crosses the passes in turn (KVzip's scoring when needed, the reference, each
        // policy's run), each one's prefill layers in its first half and its steps in the second.
        cb.on_progress = [&ctx](const PassProgress& p) {
          const float part = p.total > 0 ? static_cast<float>(p.done) / static_cast<float>(p.total) : 1.0f;
          const float within = p.decode ? 0.5f + 0.5f * part : 0.5f * part;
          ctx.progress((static_cast<float>(p.index) + within) / static_cast<float>(p.count));
        };
        cb.cancelled = [&ctx] { return ctx.cancelled(); };
        std::vector<std::string> caveats;
        cb.on_caveat = [&caveats](const std::string& c) { caveats.push_back(c); };
        // The output box shows each run's text (it stayed empty: the texts were only in Compare).
        std::string texts;
        for (const RunData& r : rerun_trace(args, cb))
          texts += r.name + (r.mode == "forced" ? " (forced: fed the recorded tokens)" : "") + ": " + r.text + "\n\n";
        app.engine.post([this, &app, caveats, texts] {
          output_ = texts;
          app.note_caveats(caveats);  // beside the runs, and on the status line after the reload
          app.reload("Re-ran policies live into " + (app.trace ? app.trace->path : std::string()) + caveat_text(caveats));
        });
      } catch (const std::exception& e) {
        if (ctx.cancelled()) {  // the user's Cancel, not a failure
          app.engine.post([&app] { app.info("Re-run cancelled; nothing appended to the trace"); });
          return;
        }
        const std::string message = error_text(e);
        app.engine.post([&app, message] { app.error(message); });
      }
    });
    if (app.headless) {
      app.engine.wait_idle();
      app.engine.drain();
    }
  }

  // The output says what runs and where they go, as a re-run's does (the status line alone did).
  void simulate_on_trace(AppState& app) {
    const auto specs = chosen_specs();
    std::function<void()> done;  // none where a trace or a policy is missing: submit_simulation says so
    if (app.trace && !specs.empty()) {
      std::string names;
      for (const std::string& s : specs) names += (names.empty() ? "" : ", ") + s;
      output_ = "Simulating " + names + " (budget " + std::to_string(budget_) + ") on the open trace\n";
      done = [this] { output_ += "Appended to its file: see Metrics, Lanes and Compare\n"; };
    }
    submit_simulation(app, specs, budget_, done, model_path_);
  }

  void drain_stream() {
    std::lock_guard<std::mutex> lock(stream_mu_);
    if (stream_.empty()) return;
    output_ += stream_;
    stream_.clear();
  }

  void output() {
    ImGui::TextDisabled("output");
    ImGui::BeginChild("##output", ImVec2(0, 0), true);
    ImGui::PushTextWrapPos(0.0f);
    ImGui::TextUnformatted(output_.c_str());
    ImGui::PopTextWrapPos();
    if (ImGui::GetScrollY() >= ImGui::GetScrollMaxY() - 4) ImGui::SetScrollHereY(1.0f);
    ImGui::EndChild();
  }

  std::string model_path_;
  std::vector<std::pair<std::string, std::string>> demos_;  // (name, text)
  std::string prompt_;
  std::string system_;  // with the chat format: a system turn before the prompt ("" for none)
  std::optional<bool> chat_choice_;  // the user's or a script's choice; else on when the model has a chat template
  bool has_chat_template_ = false;   // the model at chat_template_for_ has one
  std::string chat_template_for_;
  bool editing_prompt_ = false, focus_prompt_ = false;
  int steps_ = 64, seed_ = 42, budget_ = 64;
  float temperature_ = 0.0f, top_p_ = 1.0f;
  std::vector<PolicyRow> policies_;
  bool record_live_ = false;
  int rerun_mode_ = 0;  // 0 forced, 1 free
  std::string cuda_why_;                         // why CUDA cannot run here ("" when it can)
  bool cuda_ok_ = cuda_usable(&cuda_why_);       // asked once: it loads the driver
  Device device_ = cuda_ok_ ? Device::Cuda : Device::Cpu;
  GpuDtype gpu_dtype_ = GpuDtype::Auto;
  KvDtype kv_dtype_ = KvDtype::Fp32;
  std::string storage_from_;  // the trace whose recording last set gpu_dtype_ and kv_dtype_
  std::string out_path_ = "kvscope-recording.h5";
  ReplaceConfirm replace_;  // asks before a recording replaces an existing file
  std::string output_;
  std::vector<std::string> hints_;  // [policies_] default_params of each row
  std::tuple<int, std::string, std::size_t> hint_key_{-1, "", 0};  // budget, trace, rows they are for
  std::mutex stream_mu_;
  std::string stream_;  // pieces decoded by the worker, not yet shown
  float settings_h_ = FLT_MAX;  // height of the settings when last drawn (their region's height if they fit)
  std::vector<float> row_ends_, row_ends_now_;  // where their rows ended, last frame's and this one's
  float actions_h_ = 0;         // height of the action rows when last drawn
};

}  // namespace

std::unique_ptr<View> make_run_view(const std::string& model_path) { return std::make_unique<RunView>(model_path); }

}  // namespace kvs
