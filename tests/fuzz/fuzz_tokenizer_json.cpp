// libFuzzer target: tokenizer.json files, then encode/decode.
#include "tests/fuzz/fuzz_entries.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kvs::fuzz::tokenizer_json(data, size);
  return 0;
}
