// Buffer conversions float <-> half for the trace writer and reader: eight at a time with the
// F16C instructions where the build targets them (same bits as fp32_to_fp16 / fp16_to_fp32:
// round to nearest even, subnormals, infinities; a signaling NaN half reads as a quiet NaN), the
// scalar conversions otherwise and for the tail.
#include "analysis/float16.h"

#if defined(__F16C__)
#include <immintrin.h>
#endif

#include "kernels/quant.h"

namespace kvs {

void floats_to_halves(std::span<const float> in, uint16_t* out) {
  size_t i = 0;
#if defined(__F16C__)
  for (; i + 8 <= in.size(); i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in.data() + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
  }
#endif
  for (; i < in.size(); ++i) out[i] = fp32_to_fp16(in[i]);
}

void halves_to_floats(std::span<const uint16_t> in, float* out) {
  size_t i = 0;
#if defined(__F16C__)
  for (; i + 8 <= in.size(); i += 8)
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in.data() + i))));
#endif
  for (; i < in.size(); ++i) out[i] = fp16_to_fp32(in[i]);
}

}  // namespace kvs
