// cuBLAS by dlopen (see cuda_blas.h): the versioned soname first, then the toolkit's library
// folder this build was configured with.
#include "inference/cuda_blas.h"

#include <stdexcept>
#include <string>

#ifndef KVSCOPE_CUDA_EMU
#include <dlfcn.h>
#endif

namespace kvs::cuda {
namespace {

#ifdef KVSCOPE_CUDA_EMU
BlasApi load() {
  return {&cublasCreate, &cublasDestroy, &cublasSetStream, &cublasGetStatusString, &cublasGemmEx,
          &cublasGemmStridedBatchedEx};
}
#else
template <class F>
void resolve(void* lib, const char* name, F& fn) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  if (!fn) throw std::runtime_error(std::string("cuBLAS: symbol ") + name + " missing from libcublas");
}

BlasApi load() {
  const std::string soname = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
  void* lib = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
#ifdef KVSCOPE_CUDA_LIBRARY_DIR
  if (!lib) lib = dlopen((std::string(KVSCOPE_CUDA_LIBRARY_DIR) + "/" + soname).c_str(), RTLD_NOW | RTLD_LOCAL);
#endif
  if (!lib) {
    const char* why = dlerror();
    throw std::runtime_error("cuBLAS: cannot load " + soname + " (" + (why ? why : "not found") + ")");
  }
  BlasApi api;  // the library stays loaded for the life of the program
  resolve(lib, "cublasCreate_v2", api.create);
  resolve(lib, "cublasDestroy_v2", api.destroy);
  resolve(lib, "cublasSetStream_v2", api.set_stream);
  resolve(lib, "cublasGetStatusString", api.status_string);
  resolve(lib, "cublasGemmEx", api.gemm_ex);
  resolve(lib, "cublasGemmStridedBatchedEx", api.gemm_strided_batched_ex);
  return api;
}
#endif

}  // namespace

const BlasApi& blas() {
  static const BlasApi api = load();
  return api;
}

}  // namespace kvs::cuda
