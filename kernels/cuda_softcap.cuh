// Logit soft-capping on the device (Gemma 2), shared by the logits' kernel (softcap.cu) and the
// attention kernels' scores (attention.cu). CPU twin: ops::softcap (kernels/softcap.h), the same
// formula.
#pragma once

namespace kvs::cuda::detail {

// cap * tanh(x / cap), or x where cap is 0.
__device__ __forceinline__ float soft_capped(float x, float cap) { return cap > 0.0f ? cap * tanhf(x / cap) : x; }

}  // namespace kvs::cuda::detail
