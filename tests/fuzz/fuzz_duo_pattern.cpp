// libFuzzer target: DuoAttention pattern folders (full_attention_heads.tsv NUL config.json).
#include "tests/fuzz/fuzz_entries.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kvs::fuzz::duo_pattern(data, size);
  return 0;
}
