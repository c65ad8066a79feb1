// `kvscope heads --model M [trace.h5]`: head analyses that need the model itself (α estimated by
// restricting one head at a time, retrieval scores on needle prompts); with a trace of that
// model, the retrieval scores are also stored in it as /heads/retrieval_score, which the app's
// head grid shows.
#pragma once
#include <string>

#include "analysis/retrieval_score.h"
#include "inference/model.h"

namespace kvs {

class Tokenizer;

// Retrieval scores of every query head on needle prompts (Wu et al.), as `kvscope heads` and the
// app's head grid compute them: one prompt length (200 tokens, or half the context), five depths.
RetrievalScores score_retrieval_heads(const Model& model, const Tokenizer& tokenizer, int threads);

// Stores their mean per head in the trace as /heads/retrieval_score [L, H] (atomically, with
// their definition, model and trials kept). The caller has checked the model's shape. Throws
// InputError, storing nothing, when no trial was kept: every score would be a meaningless 0.
void store_retrieval_scores(const std::string& trace_path, const Model& model, const RetrievalScores& scores);

int heads_from_model(const std::string& model_path, const std::string& tokenizer_path, int sink, int recent,
                     const std::string& alpha_out, bool json, int threads, const std::string& trace_path = "");

}  // namespace kvs
