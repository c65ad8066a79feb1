// Recording a trace: load the model, run prefill + decode with the trace recorder attached
// (and optionally a policy enforced live), write the HDF5 trace. Shared by `kvscope record` and
// the desktop app's Run view.
#pragma once
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "app/cli/pass_progress.h"
#include "inference/engine.h"
#include "inference/generate.h"

namespace kvs {

struct RecordRequest {
  std::string model_path;
  std::string tokenizer_path;   // "" = from the model file / beside it
  std::string prompt;           // raw text
  bool chat = false;            // wrap the prompt in the model's chat format
  std::string system;           // with chat: a system turn before it ("" for none)
  int steps = 64;               // tokens to generate
  SamplingOptions sampling;
  std::string out_path;         // trace to write
  std::string policy;           // "" = full cache; else a policy spec enforced live
  int budget = 0;               // with policy
  std::string decode_dtype = "float32";
  std::size_t capture_budget_bytes = 256u << 20;  // full prefill map limit
  int threads = 0;
  Device device = Device::Cpu;
  GpuDtype gpu_dtype = GpuDtype::Auto;  // with Device::Cuda
  KvDtype kv_dtype = KvDtype::Fp32;     // with Device::Cpu
};

struct RecordResult {
  std::string prompt_text;      // the prompt as fed (decoded; a chat prompt with its markers)
  std::string generated_text;   // decoded continuation
  int prompt_len = 0;
  int n_steps = 0;
  double seconds = 0.0;          // the whole call: loading the model and writing the trace included
  // Without a live policy: the prompt's prefill (until the first generated token) and the decode
  // steps after it (first to last token); 0 when not split (a policy's run has several passes).
  double prefill_seconds = 0.0;
  double decode_seconds = 0.0;
  std::string out_path;         // "" when cancelled before a step was recorded: no trace written
  std::string cancelled_during; // then what ran: "prefill", "reference run", "KVzip scoring" or "policy run"
  std::string note;             // capture notes (e.g. prefill map reduced)
  std::string engine;           // where it ran and in what: "cpu", "cuda, fp32", "cuda, fp16", ...
  // Under a live policy, the stored run's mode and scalars (perplexity beside the full cache's,
  // first divergence, KV bytes); empty without one, or when it was cancelled.
  std::string run_mode;
  std::vector<std::pair<std::string, double>> run_scalars;
};

struct RecordCallbacks {
  std::function<void(const std::string& prompt_text)> on_prompt;                 // RecordResult::prompt_text
  std::function<void(int step, int total, const std::string& piece)> on_token;  // streaming text
  std::function<bool()> cancelled;                                              // true = stop
  // Prefill progress: layer `layer` of `n_layers` has begun its attention (layers before it are
  // done); (n_layers, n_layers) when the prompt is through. A long prompt's prefill is most of a
  // recording's wait.
  std::function<void(int layer, int n_layers)> on_prefill_layer;
  // A recording under a policy first runs the full cache over the prompt and the steps (the
  // "reference run" its metrics compare with) and, for kvzip, the "KVzip scoring" pass: their
  // prefill layers and steps. The recorded run is the last pass of `count`, reported above.
  PassReport on_pass;
};

// "P prompt tokens in A s (R tok/s) + N steps at D tok/s, T s in all on cuda, fp32": prefill and
// decode rates apart, since a long prompt's prefill would otherwise read as slow decoding (the
// total alone when the run was not split), and where it ran.
std::string timing_summary(const RecordResult& result);

// Throws InputError(name, what + "contains a NUL byte (not text)" or "is not valid UTF-8 text")
// unless `text` is text a tokenizer can take: record_trace's check of the prompt ("prompt", ""),
// and a prompt file's as it is read (its path, "prompt file ").
void require_prompt_text(const std::string& text, const std::string& name, const std::string& what);

// A prompt file's text as `record --prompt-file` takes it: without a UTF-8 byte-order mark and
// the line breaks at its end. Throws InputError naming the file when it cannot be read, is empty
// then, or is not text (`what`: "prompt file", "text file").
std::string read_prompt_file(const std::string& path, const std::string& what = "prompt file");

// Throws InputError on bad input. On cancellation the trace holds the steps done so far, or,
// cancelled before the first recorded step, none is written (out_path empty).
RecordResult record_trace(const RecordRequest& request, const RecordCallbacks& callbacks = {});

}  // namespace kvs
