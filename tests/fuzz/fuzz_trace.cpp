// libFuzzer target: hostile edits to a valid trace made through HDF5, then TraceReader reads every dataset.
#include "tests/fuzz/fuzz_entries.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kvs::fuzz::trace(data, size);
  return 0;
}
