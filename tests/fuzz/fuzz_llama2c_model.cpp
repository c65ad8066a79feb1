// libFuzzer target: llama2.c checkpoints (.bin).
#include "tests/fuzz/fuzz_entries.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kvs::fuzz::llama2c_model(data, size);
  return 0;
}
