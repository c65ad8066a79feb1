// --device: which backend runs the model; --gpu-dtype: its storage type on a GPU; --kv-dtype: the
// CPU's cache type; a re-run's defaults, the recording's storage.
#include "app/cli/device_flag.h"

#include <cstdio>

#include "analysis/trace.h"
#include "app/cli/args.h"
#include "inference/cuda_backend.h"
#include "inference/errors.h"

namespace kvs {

Device device_flag(const Args& args) {
  const std::string value = args.str("--device", "auto");
  if (value == "cpu") return Device::Cpu;
  if (value != "cuda" && value != "auto")
    throw input_error("--device", "expected cpu, cuda or auto, got '" + value + "'");
  std::string why;
  if (cuda_usable(&why)) return Device::Cuda;
  // The fallback notice is not an error: --quiet (where the command has it) silences it.
  if (value == "cuda" && !args.has("--quiet"))
    std::fprintf(stderr, "kvscope: --device cuda: %s; running on the CPU\n", why.c_str());
  return Device::Cpu;
}

RecordedStorage recorded_storage(const TraceMeta& meta) {
  RecordedStorage s;
  if (const auto kv = parse_kv_dtype(meta.device_dtype)) s.kv = *kv;
  if (meta.device == "cuda")
    if (const auto gpu = parse_gpu_dtype(meta.device_dtype)) s.gpu = *gpu;
  return s;
}

GpuDtype gpu_dtype_flag(const Args& args, GpuDtype absent) {
  if (!args.has("--gpu-dtype")) return absent;
  const std::string value = args.str("--gpu-dtype");
  if (args.str("--device", "auto") == "cpu")
    throw input_error("--gpu-dtype", "is not used: --device cpu runs the model on the CPU (--kv-dtype sets its cache)");
  if (const auto d = parse_gpu_dtype(value)) return *d;
  throw input_error("--gpu-dtype", "expected auto, fp16, bf16 or fp32, got '" + value + "'");
}

KvDtype kv_dtype_flag(const Args& args, Device device, KvDtype absent) {
  if (!args.has("--kv-dtype")) return absent;
  const std::string value = args.str("--kv-dtype");
  const auto d = parse_kv_dtype(value);
  if (!d) throw input_error("--kv-dtype", "expected fp32, fp16 or bf16, got '" + value + "'");
  if (device == Device::Cuda)
    throw input_error("--kv-dtype", "is the CPU's cache type: on the GPU --gpu-dtype sets it (or add --device cpu)");
  return *d;
}

}  // namespace kvs
