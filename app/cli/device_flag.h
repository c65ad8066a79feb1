// The --device flag of the commands that run the model: cpu, cuda, or auto (the default: cuda
// when this build and machine can run it). An explicit cuda that cannot run falls back to the
// CPU with a one-line notice on stderr (none under --quiet). --gpu-dtype: what the GPU stores
// weights and cache in; --kv-dtype: what the CPU stores its cache in. A re-run of a trace takes
// the recording's storage where neither flag names one (recorded_storage).
#pragma once
#include <string>

#include "inference/engine.h"

namespace kvs {

class Args;
struct TraceMeta;

// What a trace was recorded with, as the defaults of a run on its model: the CPU's cache type
// (device_dtype: the CPU's cache, or a GPU's weights and cache, fp32 when unnamed) and, for a
// recording on a GPU, its storage type (else auto).
struct RecordedStorage {
  KvDtype kv = KvDtype::Fp32;
  GpuDtype gpu = GpuDtype::Auto;
};
RecordedStorage recorded_storage(const TraceMeta& meta);

// Throws InputError("--device: ...") for a value other than cpu, cuda or auto.
Device device_flag(const Args& args);
// --gpu-dtype auto|fp16|bf16|fp32 (`absent` when not given: auto, see auto_gpu_dtype, or a
// recording's). Throws InputError("--gpu-dtype: ...") for another value.
GpuDtype gpu_dtype_flag(const Args& args, GpuDtype absent = GpuDtype::Auto);
// --kv-dtype fp32|fp16|bf16 for a run on `device` (device_flag's; `absent` when not given: fp32,
// or a recording's). Throws InputError("--kv-dtype: ...") for another value, or when given for a
// run on the GPU.
KvDtype kv_dtype_flag(const Args& args, Device device, KvDtype absent = KvDtype::Fp32);

}  // namespace kvs
