// libFuzzer target: the Jinja subset that renders chat templates (a model file's text).
#include "tests/fuzz/fuzz_entries.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kvs::fuzz::chat_template(data, size);
  return 0;
}
