// libFuzzer target: raw bytes as an HDF5 trace (reaches libhdf5 bugs; long runs only).
#include "tests/fuzz/fuzz_entries.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kvs::fuzz::trace_bytes(data, size);
  return 0;
}
