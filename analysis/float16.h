// float <-> IEEE half conversion of a whole buffer (round to nearest even, as kvs::fp32_to_fp16),
// so the trace writer and reader store and load float16 without HDF5's slow soft conversion.
#pragma once
#include <cstdint>
#include <span>

namespace kvs {

// out[i] = fp32_to_fp16(in[i]); out has in.size() elements.
void floats_to_halves(std::span<const float> in, uint16_t* out);
// out[i] = fp16_to_fp32(in[i]); out has in.size() elements.
void halves_to_floats(std::span<const uint16_t> in, float* out);

}  // namespace kvs
