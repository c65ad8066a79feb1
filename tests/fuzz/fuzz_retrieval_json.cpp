// libFuzzer target: retrieval-head score JSON.
#include "tests/fuzz/fuzz_entries.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kvs::fuzz::retrieval_json(data, size);
  return 0;
}
