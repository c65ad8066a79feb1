// libFuzzer target: the strict JSON parser (config.json, tokenizer.json, safetensors headers).
#include "tests/fuzz/fuzz_entries.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kvs::fuzz::json(data, size);
  return 0;
}
