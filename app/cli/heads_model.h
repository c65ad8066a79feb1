// `kvscope heads --model M`: head analyses that need the model itself (α estimated by
// restricting one head at a time, retrieval scores on needle prompts).
#pragma once
#include <string>

namespace kvs {

int heads_from_model(const std::string& model_path, const std::string& tokenizer_path, int sink, int recent,
                     const std::string& alpha_out, bool json, int threads);

}  // namespace kvs
