// The app's shared state without a window: opening traces, stepping, playback, selection, bad
// input (not HDF5, truncated, newer schema) reported while the previous trace stays open, and the
// Run view's output box after a scripted recording and live re-run.
#include <gtest/gtest.h>

#ifdef KVSCOPE_GUI
#include <hdf5.h>
#include <unistd.h>

#include <imgui.h>

#include <filesystem>
#include <fstream>

#include "app/gui/app_state.h"
#include "app/gui/jobs.h"
#include "app/views/view.h"
#include "inference/loader.h"
#include "app/gui/script.h"
#include "inference/errors.h"
#include "tests/app/gui_test_trace.h"
#include "tests/app/headless_imgui.h"
#include "tests/test_paths.h"

namespace fs = std::filesystem;

namespace kvs {
namespace {

// A stories260K file of ../shared/models ("stories260K.bin", ".gguf").
std::string stories_file(const std::string& name) {
  return test::shared_path("models/stories260K/" + name);
}

// The view of `id` among `views` (nullptr when none).
View* view_of(const std::vector<std::unique_ptr<View>>& views, const std::string& id) {
  for (const auto& v : views)
    if (id == v->id()) return v.get();
  return nullptr;
}

// The value of a view's CSV row `field` ("(missing)" when it has none).
std::string csv_field(const View& view, const AppState& app, const std::string& field) {
  for (const auto& row : view.csv(app).rows)
    if (row[0] == field) return row[1];
  return "(missing)";
}

class GuiState : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kvscope_gui_state_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    good_ = (dir_ / "good.h5").string();
    write_gui_test_trace(good_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  // Opens `bad` after the good trace and checks the good one is still the open document.
  void expect_rejected_and_kept(const std::string& bad, const std::string& why) {
    AppState app(true);
    app.open_trace(good_);
    ASSERT_TRUE(app.trace);
    app.set_step(5);
    app.open_trace(bad);
    ASSERT_TRUE(app.trace) << why;
    EXPECT_EQ(app.trace->path, good_) << why;
    EXPECT_EQ(app.step, 5) << why;
    EXPECT_TRUE(app.status_error) << why;
    EXPECT_NE(app.last_open_error.find(fs::path(bad).filename().string()), std::string::npos) << app.last_open_error;
    EXPECT_EQ(app.last_open_error.find('\n'), std::string::npos) << app.last_open_error;
  }
  fs::path dir_;
  std::string good_;
};

TEST_F(GuiState, OpensAtTheLastStepAndLoadsItsData) {
  AppState app(true);
  app.open_trace(good_);
  ASSERT_TRUE(app.trace);
  EXPECT_EQ(app.n_steps(), 16);
  EXPECT_EQ(app.step, 15);
  ASSERT_TRUE(app.step_ready());
  EXPECT_EQ(app.step_data->q_pos, 40 + 15);
  EXPECT_EQ(app.step_data->rows.size(), 3u * 4 * 56);
  ASSERT_EQ(app.trace->runs.size(), 3u);
  EXPECT_EQ(app.step_data->kept[0].size(), 3u * 2 * 56);
  EXPECT_EQ(app.step_data->kept_prev[0].size(), 3u * 2 * 56);
}

TEST_F(GuiState, StepAndSelectionAreClamped) {
  AppState app(true);
  app.open_trace(good_);
  app.set_step(-3);
  EXPECT_EQ(app.step, 0);
  EXPECT_TRUE(app.step_ready());
  EXPECT_TRUE(app.step_data->kept_prev[0].empty());  // no step before the first
  app.set_step(1000);
  EXPECT_EQ(app.step, 15);
  app.select_head(7, 9);
  EXPECT_EQ(app.layer, 2);
  EXPECT_EQ(app.head, 3);
  EXPECT_EQ(app.kv_head(), 1);  // 4 query heads over 2 KV heads
}

// --step checks its value as the script's `step N` does (it clamped 99 to the last step and
// exited 0 while `step 99` exited 2): one line naming the flag.
TEST_F(GuiState, StepFlagOutsideTheTraceIsAnErrorNamingTheFlag) {
  AppState app(true);
  app.open_trace(good_);
  apply_step_flag(app, 4);
  EXPECT_EQ(app.step, 4);
  apply_step_flag(app, -1);  // absent: stays
  EXPECT_EQ(app.step, 4);
  apply_step_flag(app, 15);
  EXPECT_EQ(app.step, 15);
  try {
    apply_step_flag(app, 16);
    FAIL() << "step 16 of a 16-step trace was accepted";
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.rfind("--step: 16 is outside 0..15", 0), 0u) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
  EXPECT_EQ(app.step, 15);
  AppState none(true);
  EXPECT_THROW(apply_step_flag(none, 3), InputError);
}

// A simulation's policy caveats reached the status line and were overwritten at once by the
// reload's "Opened ...": they now stay on the status line and beside the runs they concern.
TEST_F(GuiState, PolicyCaveatsOutliveTheReloadAndStayBesideTheirRuns) {
  AppState app(true);
  app.open_trace(good_);
  submit_simulation(app, {"snapkv", "streamingllm:sinks=99"}, 20);
  ASSERT_TRUE(app.trace);
  EXPECT_FALSE(app.status_error) << app.status;
  EXPECT_EQ(app.trace->runs.size(), 5u);
  EXPECT_EQ(app.status.rfind("Simulated 2 policies into ", 0), 0u) << app.status;
  EXPECT_NE(app.status.find("Note: snapkv_b20: "), std::string::npos) << app.status;
  EXPECT_NE(app.status.find("sinks=99"), std::string::npos) << app.status;
  EXPECT_NE(app.run_caveat("snapkv_b20"), "");
  EXPECT_NE(app.run_caveat("snapkv_b20_free"), "");  // its live re-runs
  EXPECT_EQ(app.run_caveat("snapkv_b2"), "");
  int noted = 0;
  for (const RunData& r : app.trace->runs) noted += !app.run_caveat(r.name).empty();
  EXPECT_EQ(noted, 2);
  app.reload();  // a plain reload says "Opened" again; the notes stay with the runs
  EXPECT_EQ(app.status.rfind("Opened ", 0), 0u) << app.status;
  EXPECT_NE(app.run_caveat("snapkv_b20"), "");
}

// The chat format defaults to on for a model that has one (SmolLM2-Instruct given the raw text
// ended it at once: an empty trace), off for a base model; the script's `chat on|off` sets it.
TEST(GuiRunView, ChatFormatFollowsTheModelAndTheScriptSetsIt) {
  AppState app(true);
  std::vector<std::unique_ptr<View>> views = make_views(stories_file("stories260K.gguf"));
  View* run = view_of(views, "run");
  ASSERT_TRUE(run);
  const auto chat = [&] { return csv_field(*run, app, "chat_format"); };
  EXPECT_EQ(chat(), "off");  // a base model
  apply_script_command(app, views, {"chat", "on"});
  EXPECT_EQ(chat(), "on");
  apply_script_command(app, views, {"chat", "off"});
  EXPECT_EQ(chat(), "off");
  EXPECT_THROW(apply_script_command(app, views, {"chat", "maybe"}), InputError);
  const std::string smol = default_model_path();
  if (smol.empty()) GTEST_SKIP() << "SmolLM2 GGUF not in the cache";
  std::vector<std::unique_ptr<View>> smol_views = make_views(smol);
  ASSERT_TRUE(view_of(smol_views, "run"));
  EXPECT_EQ(csv_field(*view_of(smol_views, "run"), app, "chat_format"), "on");
}

// With the chat format on, the system box's text is a system turn before the prompt, as the
// model's template writes it (record --system).
TEST_F(GuiState, SystemPromptGoesIntoTheChatTemplate) {
  const fs::path m = dir_ / "chat-model";
  fs::create_directories(m);
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.json"})
    fs::copy_file(test::shared_path(std::string("models/stories260K-hf/") + f), m / f);
  std::ofstream(m / "tokenizer_config.json")
      << R"({"chat_template": "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}<|assistant|>"})";
  AppState app(true);
  std::vector<std::unique_ptr<View>> views = make_views(m.string());
  View* run = view_of(views, "run");
  ASSERT_TRUE(run);
  EXPECT_EQ(csv_field(*run, app, "chat_format"), "on");
  const std::string out = (dir_ / "system.h5").string();
  for (const auto& [verb, arg] : std::vector<std::pair<std::string, std::string>>{
           {"system", "Be brief."}, {"prompt", "Once upon a time"}, {"steps", "4"}, {"out", out}, {"record", ""}})
    apply_script_command(app, views, {verb, arg});
  EXPECT_EQ(csv_field(*run, app, "system"), "Be brief.");
  ASSERT_TRUE(app.trace) << app.status;
  EXPECT_EQ(app.trace->meta.prompt.rfind("<|system|>Be brief.<|user|>Once upon a time<|assistant|>", 0), 0u)
      << app.trace->meta.prompt;
  // The chat format off hides the box, and its text is not used.
  const std::string plain = (dir_ / "plain.h5").string();
  for (const auto& [verb, arg] : std::vector<std::pair<std::string, std::string>>{
           {"chat", "off"}, {"out", plain}, {"record", ""}})
    apply_script_command(app, views, {verb, arg});
  ASSERT_TRUE(app.trace) << app.status;
  EXPECT_EQ(app.trace->meta.prompt.rfind("Once upon a time", 0), 0u) << app.trace->meta.prompt;
  // Text that is not UTF-8 (a script's bytes) is refused on the status line; nothing is written.
  const std::string bad = (dir_ / "bad.h5").string();
  for (const auto& [verb, arg] : std::vector<std::pair<std::string, std::string>>{
           {"chat", "on"}, {"system", "\xff"}, {"out", bad}, {"record", ""}})
    apply_script_command(app, views, {verb, arg});
  EXPECT_NE(app.status.find("system prompt: is not valid UTF-8 text"), std::string::npos) << app.status;
  EXPECT_FALSE(fs::exists(bad));
}

// A recording's text streams into the output box, then the whole text replaces it: the pieces
// not yet drained by a frame were appended after it (a scripted recording showed its text twice).
TEST_F(GuiState, RecordedTextIsShownOnce) {
  const std::string model = stories_file("stories260K.bin");
  if (!fs::exists(model)) GTEST_SKIP() << "test model missing: " << model;
  ImGuiContext* context = gui_test::headless_imgui(1280, 720);
  AppState app(true);
  std::vector<std::unique_ptr<View>> views = make_views(model);
  View* run = view_of(views, "run");
  ASSERT_TRUE(run);
  const std::string out = (dir_ / "recorded.h5").string();
  for (const auto& [verb, arg] : std::vector<std::pair<std::string, std::string>>{
           {"prompt", "Once upon a time"}, {"steps", "24"}, {"out", out}, {"record", ""}})
    apply_script_command(app, views, {verb, arg});
  ASSERT_TRUE(app.trace) << app.status;
  ImGui::NewFrame();  // a frame drains what streamed
  ImGui::Begin("Run");
  run->draw(app);
  ImGui::End();
  ImGui::EndFrame();
  ImGui::DestroyContext(context);
  const std::string text = csv_field(*run, app, "output");
  ASSERT_EQ(text.rfind("Once upon a time", 0), 0u) << text;
  const std::string generated = text.substr(std::string("Once upon a time").size());
  ASSERT_FALSE(generated.empty());
  const size_t half = generated.size() / 2;
  EXPECT_FALSE(generated.size() % 2 == 0 && generated.compare(0, half, generated, half, half) == 0) << text;
}

// A live re-run from the Run view shows each run's text in the output box (it stayed empty).
TEST_F(GuiState, LiveRerunShowsEachRunsText) {
  const std::string model = stories_file("stories260K.bin");
  if (!fs::exists(model)) GTEST_SKIP() << "test model missing: " << model;
  AppState app(true);
  std::vector<std::unique_ptr<View>> views = make_views(model);
  View* run = view_of(views, "run");
  ASSERT_TRUE(run);
  const std::string out = (dir_ / "rerun.h5").string();
  for (const auto& [verb, arg] : std::vector<std::pair<std::string, std::string>>{
           {"prompt", "Once upon a time"}, {"steps", "16"}, {"out", out}, {"record", ""},
           {"policies", "streamingllm|window"}, {"budget", "8"}, {"mode", "free"}, {"rerun", ""}})
    apply_script_command(app, views, {verb, arg});
  const std::string text = csv_field(*run, app, "output");
  EXPECT_NE(text.find("streamingllm_b8_free: "), std::string::npos) << text;
  EXPECT_NE(text.find("window_b8_free: "), std::string::npos) << text;
}

TEST_F(GuiState, PlaybackAdvancesAndStopsAtTheEnd) {
  AppState app(true);
  app.open_trace(good_);
  app.set_step(10);
  app.playing = true;
  app.speed = 10.0f;
  app.tick(0.25);  // 2.5 steps
  EXPECT_EQ(app.step, 12);
  app.tick(1.0);
  EXPECT_EQ(app.step, 15);
  EXPECT_FALSE(app.playing);
  // Play at the last step (where a trace opens) starts again from the first; pause stays put.
  app.toggle_play();
  EXPECT_TRUE(app.playing);
  EXPECT_EQ(app.step, 0);
  app.tick(0.25);
  EXPECT_EQ(app.step, 2);
  app.toggle_play();
  EXPECT_FALSE(app.playing);
  EXPECT_EQ(app.step, 2);
}

// A step whose rows cannot be read (a damaged value) is marked unreadable, with the reason, so
// the views say so instead of showing the last step read; a readable step clears the mark.
TEST_F(GuiState, UnreadableStepIsMarkedNotReplacedByTheLastOneRead) {
  {
    const hid_t f = H5Fopen(good_.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    const hid_t ds = H5Dopen2(f, "/attention/decode", H5P_DEFAULT);
    const hid_t space = H5Dget_space(ds);
    const hsize_t at[4] = {7, 1, 0, 2}, one[4] = {1, 1, 1, 1};
    H5Sselect_hyperslab(space, H5S_SELECT_SET, at, nullptr, one, nullptr);
    const hid_t mem = H5Screate_simple(4, one, nullptr);
    const float bad = -0.5f;
    ASSERT_GE(H5Dwrite(ds, H5T_NATIVE_FLOAT, mem, space, H5P_DEFAULT, &bad), 0);
    H5Sclose(mem);
    H5Sclose(space);
    H5Dclose(ds);
    H5Fclose(f);
  }
  AppState app(true);
  app.open_trace(good_);
  ASSERT_TRUE(app.trace);
  app.set_step(7);
  EXPECT_TRUE(app.step_unreadable());
  EXPECT_FALSE(app.step_ready());
  EXPECT_NE(app.unreadable_message.find("step 7 layer 1 head 0 key 2 holds -0.500000, not a probability"),
            std::string::npos) << app.unreadable_message;
  EXPECT_TRUE(app.status_error);
  app.set_step(8);
  EXPECT_FALSE(app.step_unreadable());
  EXPECT_TRUE(app.step_ready());
}

TEST_F(GuiState, FileThatIsNotHdf5LeavesThePreviousTraceOpen) {
  const std::string bad = (dir_ / "dropped.txt").string();
  std::ofstream(bad) << "plain text, not HDF5\n";
  expect_rejected_and_kept(bad, "not HDF5");
}

TEST_F(GuiState, TruncatedTraceLeavesThePreviousTraceOpen) {
  const std::string bad = (dir_ / "truncated.h5").string();
  fs::copy_file(good_, bad);
  fs::resize_file(bad, fs::file_size(bad) / 2);
  expect_rejected_and_kept(bad, "truncated");
}

TEST_F(GuiState, NewerSchemaLeavesThePreviousTraceOpen) {
  const std::string bad = (dir_ / "newer.h5").string();
  fs::copy_file(good_, bad);
  {
    const hid_t f = H5Fopen(bad.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    H5Adelete(f, "schema_version");
    const hid_t space = H5Screate(H5S_SCALAR);
    const hid_t a = H5Acreate2(f, "schema_version", H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT);
    const long long v = kTraceSchemaVersion + 1;
    H5Awrite(a, H5T_NATIVE_LLONG, &v);
    H5Aclose(a);
    H5Sclose(space);
    H5Fclose(f);
  }
  expect_rejected_and_kept(bad, "newer schema");
}

}  // namespace
}  // namespace kvs

#else
TEST(GuiState, SkippedWithoutTheDesktopApp) { GTEST_SKIP() << "built without the desktop app"; }
#endif
