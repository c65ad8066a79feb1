// libFuzzer target: llama2.c tokenizer.bin files, then encode/decode.
#include "tests/fuzz/fuzz_entries.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kvs::fuzz::llama2c_tokenizer(data, size);
  return 0;
}
