// The six cuBLAS entry points the CUDA backend calls, resolved from libcublas when the backend
// is first built rather than linked into the program: libcublas and libcublasLt (~0.5 GB) took
// ~0.1 s to map and initialize at every start of every command, GPU or not (twice, with the
// OMP_WAIT_POLICY re-exec). Against the CPU emulation of CUDA (tests/cuda_emu) they are the
// emulation's own functions.
#pragma once
#include <cublas_v2.h>

namespace kvs::cuda {

// The C signatures (cuBLAS 13's header adds C++ overloads of the two GEMMs, so decltype cannot
// name them).
struct BlasApi {
  cublasStatus_t (*create)(cublasHandle_t* handle) = nullptr;
  cublasStatus_t (*destroy)(cublasHandle_t handle) = nullptr;
  cublasStatus_t (*set_stream)(cublasHandle_t handle, cudaStream_t stream) = nullptr;
  const char* (*status_string)(cublasStatus_t status) = nullptr;
  cublasStatus_t (*gemm_ex)(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const void* alpha, const void* A, cudaDataType_t Atype, int lda, const void* B,
                            cudaDataType_t Btype, int ldb, const void* beta, void* C, cudaDataType_t Ctype, int ldc,
                            cublasComputeType_t compute, cublasGemmAlgo_t algo) = nullptr;
  cublasStatus_t (*gemm_strided_batched_ex)(cublasHandle_t handle, cublasOperation_t transa,
                                            cublasOperation_t transb, int m, int n, int k, const void* alpha,
                                            const void* A, cudaDataType_t Atype, int lda, long long strideA,
                                            const void* B, cudaDataType_t Btype, int ldb, long long strideB,
                                            const void* beta, void* C, cudaDataType_t Ctype, int ldc,
                                            long long strideC, int batch_count, cublasComputeType_t compute,
                                            cublasGemmAlgo_t algo) = nullptr;
};

// Loaded on the first call (thread-safe); throws std::runtime_error("cuBLAS: ...") naming the
// library or symbol that could not be found.
const BlasApi& blas();

}  // namespace kvs::cuda
