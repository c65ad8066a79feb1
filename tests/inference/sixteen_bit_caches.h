// Test support: the engine options of every 16-bit CPU cache, fp16 and bf16, with keys cached at
// their position and before rotation (rope_in_cache), each with a name for SCOPED_TRACE.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "inference/engine.h"

namespace kvs::tiny {

inline std::vector<std::pair<std::string, EngineOptions>> sixteen_bit_caches() {
  std::vector<std::pair<std::string, EngineOptions>> out;
  for (const KvDtype kv : {KvDtype::Fp16, KvDtype::Bf16})
    for (const bool rope_in_cache : {false, true}) {
      EngineOptions o;
      o.kv_dtype = kv;
      o.rope_in_cache = rope_in_cache;
      out.emplace_back(std::string(kv_dtype_name(kv)) + (rope_in_cache ? ", rope in cache" : ""), o);
    }
  return out;
}

}  // namespace kvs::tiny
