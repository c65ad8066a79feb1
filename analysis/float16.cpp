// Buffer conversion float -> half for the trace writer.
#include "analysis/float16.h"

#include "kernels/quant.h"

namespace kvs {

void floats_to_halves(std::span<const float> in, uint16_t* out) {
  for (size_t i = 0; i < in.size(); ++i) out[i] = fp32_to_fp16(in[i]);
}

}  // namespace kvs
