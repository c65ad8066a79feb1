// `kvscope heads --model M [trace.h5]`: head analyses that need the model itself (α estimated by
// restricting one head at a time, retrieval scores on needle prompts); with a trace of that
// model, the retrieval scores are also stored in it as /heads/retrieval_score, which the app's
// head grid shows. The runs cache keys and values as the trace was recorded unless told otherwise.
#pragma once
#include <optional>
#include <string>

#include "analysis/retrieval_score.h"
#include "inference/engine.h"
#include "inference/model.h"

namespace kvs {

class Tokenizer;

// Retrieval scores of every query head on needle prompts (Wu et al.), as `kvscope heads` and the
// app's head grid compute them: one prompt length (200 tokens, or half the context), five depths.
// The runs keep their keys and values in `kv_dtype`, as a recording of the model did.
RetrievalScores score_retrieval_heads(const Model& model, const Tokenizer& tokenizer, int threads,
                                      KvDtype kv_dtype = KvDtype::Fp32);

// Stores their mean per head in the trace as /heads/retrieval_score [L, H] (atomically, with
// their definition, model and trials kept). The caller has checked the model's shape. Throws
// InputError, storing nothing, when no trial was kept: every score would be a meaningless 0.
// `kv_dtype`: the cache the scoring runs kept keys and values in (attribute kv_dtype).
void store_retrieval_scores(const std::string& trace_path, const Model& model, const RetrievalScores& scores,
                            KvDtype kv_dtype);

struct HeadsModelOptions {
  std::string model_path, tokenizer_path;
  int sink = 4, recent = 32;   // α's streaming window
  std::string alpha_out;       // DuoAttention pattern folder to write, or empty
  bool json = false;
  int threads = 0;             // 0: all cores
  std::string trace_path;      // a trace of the model to store α and the scores in, or empty
  // The CPU's cache for every run (--kv-dtype); unset: the trace's recording's, else fp32.
  std::optional<KvDtype> kv_dtype;
};
int heads_from_model(const HeadsModelOptions& options);

}  // namespace kvs
