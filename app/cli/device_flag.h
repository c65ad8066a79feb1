// The --device flag of the commands that run the model: cpu, cuda, or auto (the default: cuda
// when this build and machine can run it). An explicit cuda that cannot run falls back to the
// CPU with a one-line notice on stderr (none under --quiet). --gpu-dtype: what the GPU stores
// weights and cache in; --kv-dtype: what the CPU stores its cache in.
#pragma once
#include <string>

#include "inference/engine.h"

namespace kvs {

class Args;

// Throws InputError("--device: ...") for a value other than cpu, cuda or auto.
Device device_flag(const Args& args);
// --gpu-dtype auto|fp16|bf16|fp32 (default auto: see auto_gpu_dtype). Throws
// InputError("--gpu-dtype: ...") for another value.
GpuDtype gpu_dtype_flag(const Args& args);
// --kv-dtype fp32|fp16|bf16 (default fp32) for a run on `device` (device_flag's). Throws
// InputError("--kv-dtype: ...") for another value, or when given for a run on the GPU.
KvDtype kv_dtype_flag(const Args& args, Device device);

}  // namespace kvs
