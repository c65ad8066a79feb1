// libFuzzer target: Hugging Face folders (config.json NUL model.safetensors).
#include "tests/fuzz/fuzz_entries.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kvs::fuzz::hf_folder(data, size);
  return 0;
}
