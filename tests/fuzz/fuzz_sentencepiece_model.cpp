// libFuzzer target: SentencePiece .model files (protobuf ModelProto), then encode/decode.
#include "tests/fuzz/fuzz_entries.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kvs::fuzz::sentencepiece_model(data, size);
  return 0;
}
