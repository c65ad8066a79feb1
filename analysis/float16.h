// float <-> IEEE half conversion (round to nearest even), so the trace writer stores float16
// without HDF5's slow soft conversion.
#pragma once
#include <cstdint>
#include <span>

namespace kvs {

uint16_t float_to_half(float f);
float half_to_float(uint16_t h);
// out[i] = float_to_half(in[i]); out has in.size() elements.
void floats_to_halves(std::span<const float> in, uint16_t* out);

}  // namespace kvs
