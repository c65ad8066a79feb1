// --device on the commands that run the model: a bad value is one line and exit 2; cuda on a
// machine or build that cannot run it falls back to the CPU with a one-line notice and records
// the same trace; cpu never mentions CUDA. --gpu-dtype: a bad value likewise; the trace and the
// closing line name the device and storage type that ran; fp32 (auto's choice for a model as
// small as stories260K) records the CPU's rows, and its live reruns keep the CPU's tokens.
// --kv-dtype: the CPU's cache type, named likewise. A trace's reruns and KVzip scoring take the
// recording's storage unless told otherwise, and so do heads --model's runs beside a trace.
#include <gtest/gtest.h>

#include <filesystem>
#include <tuple>

#include "analysis/kvzip_scores.h"
#include "analysis/trace.h"
#include "app/cli/device_flag.h"
#include "app/cli/policy_setup.h"
#include "cli_util.h"
#include "inference/cuda_backend.h"
#include "inference/json.h"
#include "inference/loader.h"

namespace kvs::cli_test {
namespace {

TEST(CliDevice, UnknownDeviceIsOneLineAndExitTwo) {
  TempDir out;
  const CliResult r = run_kvscope({"record", "--model", stories_bin(), "--prompt", "Once upon a time", "--steps",
                                   "4", "--device", "gpu", "--out", out.file("t.h5")});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "kvscope: --device: expected cpu, cuda or auto, got 'gpu'\n");
  EXPECT_FALSE(std::filesystem::exists(out.file("t.h5")));
}

TEST(CliDevice, UnknownGpuDtypeIsOneLineAndExitTwo) {
  TempDir out;
  const CliResult r = run_kvscope({"record", "--model", stories_bin(), "--prompt", "Once upon a time", "--steps",
                                   "4", "--gpu-dtype", "fp8", "--out", out.file("t.h5")});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "kvscope: --gpu-dtype: expected auto, fp16, bf16 or fp32, got 'fp8'\n");
  EXPECT_FALSE(std::filesystem::exists(out.file("t.h5")));
}

TEST(CliDevice, CudaWithoutAGpuFallsBackToTheCpuWithANotice) {
  std::string why;
  if (cuda_usable(&why)) GTEST_SKIP() << "a GPU is present";
  TempDir out;
  const CliResult cuda = run_kvscope({"record", "--model", stories_bin(), "--prompt", "Once upon a time",
                                      "--steps", "8", "--device", "cuda", "--out", out.file("cuda.h5")});
  const CliResult cpu = run_kvscope({"record", "--model", stories_bin(), "--prompt", "Once upon a time",
                                     "--steps", "8", "--device", "cpu", "--out", out.file("cpu.h5")});
  ASSERT_EQ(cuda.code, 0) << cuda.err;
  ASSERT_EQ(cpu.code, 0) << cpu.err;
  EXPECT_EQ(cuda.out, cpu.out);
  const std::string notice = "kvscope: --device cuda: " + why + "; running on the CPU\n";
  EXPECT_EQ(cuda.err.substr(0, notice.size()), notice);
  EXPECT_EQ(cpu.err.find("CUDA"), std::string::npos) << cpu.err;
  EXPECT_EQ(count_lines(cuda.err), count_lines(cpu.err) + 1);
  EXPECT_EQ(TraceReader(out.file("cuda.h5")).meta().device, "cpu");  // where it really ran
  // --quiet prints nothing but errors, and the notice is not one.
  const CliResult quiet = run_kvscope({"record", "--model", stories_bin(), "--prompt", "Once upon a time", "--steps",
                                       "8", "--device", "cuda", "--quiet", "--out", out.file("quiet.h5")});
  ASSERT_EQ(quiet.code, 0) << quiet.err;
  EXPECT_EQ(quiet.err, "");
}

TEST(CliDevice, TheTraceSaysWhichDeviceRanIt) {
  TempDir out;
  for (const char* device : {"cpu", "auto"}) {
    const std::string path = out.file(std::string(device) + ".h5");
    const CliResult r = run_kvscope({"record", "--model", stories_bin(), "--prompt", "Once upon a time", "--steps",
                                     "2", "--device", device, "--out", path});
    ASSERT_EQ(r.code, 0) << r.err;
    const bool gpu = std::string(device) == "auto" && cuda_usable();
    EXPECT_EQ(TraceReader(path).meta().device, gpu ? "cuda" : "cpu");
    EXPECT_EQ(TraceReader(path).meta().device_dtype, "fp32");  // auto stores a model as small as stories260K in fp32
    // The closing line says so too.
    const std::string ran = std::string(" in all on ") + (gpu ? "cuda, fp32" : "cpu") + "; trace ";
    EXPECT_NE(r.err.find(ran), std::string::npos) << r.err;
  }
  for (const std::string dtype : {"fp16", "bf16"}) {
    const std::string path = out.file(dtype + ".h5");
    const CliResult r = run_kvscope({"record", "--model", stories_bin(), "--prompt", "Once upon a time", "--steps",
                                     "2", "--gpu-dtype", dtype, "--out", path});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(TraceReader(path).meta().device_dtype, cuda_usable() ? dtype : "fp32");
    EXPECT_NE(r.err.find(cuda_usable() ? " on cuda, " + dtype + ";" : " on cpu;"), std::string::npos) << r.err;
  }
}

// --kv-dtype: the CPU's cache in fp16 or bf16. The trace, the closing line, `info` and a live
// rerun's run say so; stories260K tells the same story; a bad value is one line and exit 2, and
// on a GPU (which sets its cache with --gpu-dtype) the flag is refused.
TEST(CliDevice, KvDtypeSetsTheCpusCache) {
  TempDir out;
  const std::string fp32 = out.file("fp32.h5"), fp16 = out.file("fp16.h5");
  const CliResult a = run_kvscope({"record", "--model", stories_bin(), "--prompt", "Once upon a time", "--steps",
                                   "24", "--device", "cpu", "--out", fp32});
  const CliResult b = run_kvscope({"record", "--model", stories_bin(), "--prompt", "Once upon a time", "--steps",
                                   "24", "--device", "cpu", "--kv-dtype", "fp16", "--out", fp16});
  ASSERT_EQ(a.code, 0) << a.err;
  ASSERT_EQ(b.code, 0) << b.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(TraceReader(fp16).meta().device_dtype, "fp16");
  EXPECT_NE(b.err.find(" in all on cpu, fp16 cache; trace "), std::string::npos) << b.err;
  const CliResult info = run_kvscope({"info", fp16});
  ASSERT_EQ(info.code, 0) << info.err;
  EXPECT_NE(info.out.find("engine     cpu, cache in fp16\n"), std::string::npos) << info.out;

  const CliResult rerun = run_kvscope({"rerun", fp16, "--policy", "h2o", "--budget", "12", "--device", "cpu",
                                       "--kv-dtype", "bf16"});
  ASSERT_EQ(rerun.code, 0) << rerun.err;
  const RunData run = TraceReader(fp16).read_run("h2o_b12_forced", false);
  EXPECT_EQ(run.device + ", " + run.device_dtype, "cpu, bf16");

  const CliResult bad = run_kvscope({"record", "--model", stories_bin(), "--prompt", "Once upon a time", "--steps",
                                     "4", "--device", "cpu", "--kv-dtype", "fp8", "--out", out.file("bad.h5")});
  EXPECT_EQ(bad.code, 2);
  EXPECT_EQ(bad.err, "kvscope: --kv-dtype: expected fp32, fp16 or bf16, got 'fp8'\n");
  EXPECT_FALSE(std::filesystem::exists(out.file("bad.h5")));
  if (cuda_usable()) {
    const CliResult gpu = run_kvscope({"record", "--model", stories_bin(), "--prompt", "Once upon a time", "--steps",
                                       "4", "--device", "cuda", "--kv-dtype", "fp16", "--out", out.file("gpu.h5")});
    EXPECT_EQ(gpu.code, 2);
    EXPECT_EQ(gpu.err, "kvscope: --kv-dtype: is the CPU's cache type: on the GPU --gpu-dtype sets it (or add --device cpu)\n");
  }
}

// stories260K recorded on the CPU over an fp16 cache, `steps` decode steps, into `path`.
void record_fp16(const std::string& path, int steps) {
  const CliResult rec = run_kvscope({"record", "--model", stories_bin(), "--prompt", "Once upon a time", "--steps",
                                     std::to_string(steps), "--device", "cpu", "--kv-dtype", "fp16", "--out", path});
  ASSERT_EQ(rec.code, 0) << rec.err;
}

// A recording's storage is the default of what runs on it again: `rerun` without --kv-dtype
// caches as the recording did (its reference too, and it says so), and KVzip's scoring pass for
// `simulate` (and the app's Simulate) does, so their numbers are the ones the trace's rows came
// from. A flag still chooses another.
TEST(CliDevice, RerunsAndScoringCacheAsTheRecordingDid) {
  TempDir out;
  const std::string fp16 = out.file("fp16.h5");
  ASSERT_NO_FATAL_FAILURE(record_fp16(fp16, 12));
  for (const auto& [flags, run_name, dtype] :
       std::vector<std::tuple<std::vector<std::string>, std::string, std::string>>{
           {{}, "h2o_b8_forced", "fp16"}, {{"--kv-dtype", "fp32"}, "h2o_b8_free", "fp32"}}) {
    std::vector<std::string> args = {"rerun", fp16, "--policy", "h2o", "--budget", "8", "--device", "cpu",
                                     "--mode", run_name.substr(run_name.rfind('_') + 1)};
    args.insert(args.end(), flags.begin(), flags.end());
    const CliResult r = run_kvscope(args);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(TraceReader(fp16).read_run(run_name, false).device_dtype, dtype) << run_name;
    // Said when it is not what --kv-dtype's own default would run.
    const std::string note = "kvscope: note: the runs cache keys and values in fp16, as the trace was recorded "
                             "(--kv-dtype fp32 for the exact cache)\n";
    EXPECT_EQ(r.err.find(note) != std::string::npos, flags.empty()) << r.err;
  }

  // KVzip's scores on the recording's cache: those of an fp16 engine, not of an fp32 one.
  const TraceReader trace(fp16);
  const Model model = load_model(stories_bin());
  const auto tokenizer = load_tokenizer(model, "");
  const auto ids = trace.token_ids();
  const std::vector<int> prompt(ids.begin(), ids.begin() + trace.meta().prompt_len);
  KvzipOptions o;
  o.engine.n_threads = 1;
  const std::vector<float> fp32_scores = kvzip_key_scores(model, *tokenizer, prompt, o);
  o.engine.kv_dtype = KvDtype::Fp16;
  const std::vector<float> fp16_scores = kvzip_key_scores(model, *tokenizer, prompt, o);
  ASSERT_NE(fp16_scores, fp32_scores) << "the cache's type should move some score";
  EXPECT_EQ(kvzip_scores_for_trace(stories_bin(), "", trace, 1), fp16_scores);
}

// heads --model beside a trace estimates α (and scores retrieval heads) on the recording's cache,
// so what it stores there describes the model as it ran; --kv-dtype chooses another, and is
// refused where no model runs.
TEST(CliDevice, HeadsOnTheModelCacheAsTheRecordingDid) {
  TempDir out;
  const std::string fp16 = out.file("fp16.h5");
  ASSERT_NO_FATAL_FAILURE(record_fp16(fp16, 4));
  const auto heads = [&](std::vector<std::string> flags) {
    std::vector<std::string> args = {"heads", fp16, "--model", stories_bin(), "--threads", "1", "--json"};
    args.insert(args.end(), flags.begin(), flags.end());
    const CliResult r = run_kvscope(args);
    EXPECT_EQ(r.code, 0) << r.err;
    return Json::parse(r.out, "heads stdout");
  };
  const std::string suffix = "3 passkey prompts, fp16 cache";
  const Json recorded = heads({});
  const std::string source = recorded.get_string("alpha_source", "");
  EXPECT_EQ(source.substr(source.size() - std::min(source.size(), suffix.size())), suffix) << source;
  EXPECT_EQ(TraceReader(fp16).read_string_attr("/heads/alpha", "source"), source + " on " + stories_bin());

  const Json exact = heads({"--kv-dtype", "fp32"});
  EXPECT_EQ(exact.get_string("alpha_source", "").find("cache"), std::string::npos) << "fp32 is not named";
  const auto alpha = [](const Json& j) {
    std::vector<double> v;
    for (const Json& x : j.find("alpha")->items()) v.push_back(x.as_number());
    return v;
  };
  EXPECT_NE(alpha(recorded), alpha(exact)) << "the cache's type should move some gate";
  EXPECT_EQ(alpha(heads({"--kv-dtype", "fp16"})), alpha(recorded));

  const CliResult stats = run_kvscope({"heads", fp16, "--kv-dtype", "fp16"});
  EXPECT_EQ(stats.code, 2);
  EXPECT_EQ(stats.err, "kvscope: --kv-dtype: only with --model (a trace's statistics run no model)\n");
}

TEST(CliDevice, RecordedStorageReadsTheTracesDeviceAndType) {
  const auto storage = [](const std::string& device, const std::string& dtype) {
    TraceMeta m;
    m.device = device;
    m.device_dtype = dtype;
    const RecordedStorage s = recorded_storage(m);
    return std::string(kv_dtype_name(s.kv)) + "/" + gpu_dtype_name(s.gpu);
  };
  EXPECT_EQ(storage("cpu", "fp32"), "fp32/auto");
  EXPECT_EQ(storage("cpu", "fp16"), "fp16/auto");  // the CPU's cache: a GPU run chooses its own storage
  EXPECT_EQ(storage("cuda", "bf16"), "bf16/bf16");  // a GPU's weights and cache: the CPU caches in bf16 too
  EXPECT_EQ(storage("cuda", "fp32"), "fp32/fp32");
  EXPECT_EQ(storage("", ""), "fp32/auto");  // a trace older than device_dtype
}

// --gpu-dtype fp32 on a GPU, and auto, which stores a model as small as stories260K in fp32: the
// CPU's story, and its decode rows to accumulation order (1e-4; 16-bit storage moves them by up
// to 1e-2). Without a GPU every run is the CPU's.
TEST(CliDevice, Fp32AndAutoOnTheGpuRecordTheCpusRows) {
  TempDir out;
  const std::string cpu = out.file("cpu.h5");
  const CliResult a = run_kvscope({"record", "--model", stories_bin(), "--prompt", "Once upon a time", "--steps",
                                   "24", "--device", "cpu", "--out", cpu});
  ASSERT_EQ(a.code, 0) << a.err;
  const TraceReader ra(cpu);
  for (const std::string dtype : {"fp32", "auto"}) {
    SCOPED_TRACE(dtype);
    const std::string gpu = out.file(dtype + ".h5");
    const CliResult b = run_kvscope({"record", "--model", stories_bin(), "--prompt", "Once upon a time", "--steps",
                                     "24", "--gpu-dtype", dtype, "--out", gpu});
    ASSERT_EQ(b.code, 0) << b.err;
    EXPECT_EQ(a.out, b.out);
    const TraceReader rb(gpu);
    EXPECT_EQ(rb.meta().device, cuda_usable() ? "cuda" : "cpu");
    EXPECT_EQ(rb.meta().device_dtype, "fp32");
    ASSERT_EQ(ra.token_ids(), rb.token_ids());
    std::vector<float> rows_a, rows_b, lse;
    for (int step = 0; step < ra.meta().n_steps; ++step) {
      ra.read_decode_step(step, rows_a, lse);
      rb.read_decode_step(step, rows_b, lse);
      ASSERT_EQ(rows_a.size(), rows_b.size());
      for (std::size_t i = 0; i < rows_a.size(); ++i) ASSERT_NEAR(rows_a[i], rows_b[i], 1e-4) << "step " << step;
    }
  }
}

// A live rerun on the GPU in fp32 makes the CPU's decisions: H2O and StreamingLLM keep the same
// tokens at every step, layer and head, and their runs' rows are the CPU's to 1e-4.
TEST(CliDevice, Fp32RerunOnTheGpuKeepsTheCpusTokens) {
  TempDir out;
  const std::string cpu = out.file("cpu.h5"), fp32 = out.file("fp32.h5");
  const CliResult rec = run_kvscope({"record", "--model", stories_bin(), "--prompt", "Once upon a time", "--steps",
                                     "30", "--device", "cpu", "--out", cpu});
  ASSERT_EQ(rec.code, 0) << rec.err;
  std::filesystem::copy_file(cpu, fp32);
  const CliResult a = run_kvscope({"rerun", cpu, "--policy", "h2o", "--policy", "streamingllm", "--budget", "12",
                                   "--device", "cpu"});
  const CliResult b = run_kvscope({"rerun", fp32, "--policy", "h2o", "--policy", "streamingllm", "--budget", "12",
                                   "--gpu-dtype", "fp32"});
  ASSERT_EQ(a.code, 0) << a.err;
  ASSERT_EQ(b.code, 0) << b.err;
  const TraceReader ra(cpu), rb(fp32);
  for (const char* name : {"h2o_b12_forced", "streamingllm_b12_forced"}) {
    SCOPED_TRACE(name);
    const RunData x = ra.read_run(name, true), y = rb.read_run(name, true);
    EXPECT_EQ(x.device + ", " + x.device_dtype, "cpu, fp32");
    EXPECT_EQ(y.device + ", " + y.device_dtype, cuda_usable() ? "cuda, fp32" : "cpu, fp32");
    EXPECT_EQ(x.kept, y.kept);
    EXPECT_EQ(x.tokens, y.tokens);
    ASSERT_EQ(x.attention.size(), y.attention.size());
    ASSERT_FALSE(x.attention.empty());
    for (std::size_t i = 0; i < x.attention.size(); ++i) ASSERT_NEAR(x.attention[i], y.attention[i], 1e-4) << i;
  }
}

}  // namespace
}  // namespace kvs::cli_test
