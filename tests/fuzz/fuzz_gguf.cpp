// libFuzzer target: GGUF files (container, tokenizer metadata, model tensors).
#include "tests/fuzz/fuzz_entries.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kvs::fuzz::gguf(data, size);
  return 0;
}
