// Error type for bad user input (files, flags, prompts, traces).
// The message is one line naming the thing and the problem, e.g.
// "model.gguf: truncated file (tensor blk.0.attn_q.weight ends past 1185376 bytes)".
// The CLI prints it and exits with code 2; the UI shows it.
#pragma once
#include <stdexcept>
#include <string>

namespace kvs {

struct InputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Builds "<what>: <problem>".
inline InputError input_error(const std::string& what, const std::string& problem) {
  return InputError(what + ": " + problem);
}

}  // namespace kvs
