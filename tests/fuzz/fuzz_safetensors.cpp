// libFuzzer target: .safetensors files (header and every tensor's conversion).
#include "tests/fuzz/fuzz_entries.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kvs::fuzz::safetensors(data, size);
  return 0;
}
