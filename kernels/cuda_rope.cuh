// The rotation of one pair of a head by RoPE on the device, shared by rope.cu (rows of heads)
// and kv_cache.cu (decode's rotate-and-append). CPU twin: ops::rope_apply.
#pragma once
#include <cuda_runtime.h>

namespace kvs::cuda::detail {

// Rotates pair i of head v [2 half] by the angle whose cos/sin are c[i], s[i]: (v[2i], v[2i+1])
// when interleaved, (v[i], v[i + half]) otherwise.
__device__ __forceinline__ void rotate_pair(float* v, const float* c, const float* s, int i, int half,
                                            bool interleaved) {
  const int i0 = interleaved ? 2 * i : i;
  const int i1 = interleaved ? 2 * i + 1 : i + half;
  const float a = v[i0], b = v[i1];
  v[i0] = a * c[i] - b * s[i];
  v[i1] = a * s[i] + b * c[i];
}

}  // namespace kvs::cuda::detail
