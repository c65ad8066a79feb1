// KVScope's Jinja subset: renders a model's chat template as transformers' apply_chat_template
// renders it (jinja2's sandbox with trim_blocks and lstrip_blocks, break and continue,
// raise_exception, strftime_now, tojson and {% generation %}), so that --chat writes the prompt
// the model's own template writes. No C++ Jinja engine is packaged for Debian; this one holds
// what chat templates use: if/for/set/macro/filter blocks, namespace(), the usual filters, tests
// and string methods, Python's str() of values. It is checked against jinja2 on llama.cpp's
// collection of 70 real templates by scripts/check-chat-templates.sh.
#pragma once
#include <string>

#include "inference/jinja_value.h"

namespace kvs::jinja {

// `source` rendered with the names in `context` (messages, add_generation_prompt, bos_token, ...)
// beside the global functions (inference/jinja_builtins.h). Throws Error ("line N: ...") where
// the template is invalid, uses what the subset lacks, raises an exception, or runs past its
// limits (1 MB of output, a million loop iterations, macro calls 64 deep).
std::string render(const std::string& source, const Dict& context);

}  // namespace kvs::jinja
