// `kvscope heads --model M [trace.h5]`: head analyses that need the model itself (α estimated by
// restricting one head at a time, retrieval scores on needle prompts); with a trace of that
// model, the retrieval scores are also stored in it as /heads/retrieval_score, which the app's
// head grid shows.
#pragma once
#include <string>

namespace kvs {

int heads_from_model(const std::string& model_path, const std::string& tokenizer_path, int sink, int recent,
                     const std::string& alpha_out, bool json, int threads, const std::string& trace_path = "");

}  // namespace kvs
