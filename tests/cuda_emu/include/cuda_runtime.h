// CUDA emulator (tests only): what device code sees — the built-in index variables, the kernel
// qualifiers, __syncthreads and warp shuffles — over the runtime API of cuda_runtime_api.h.
// Kernels are plain functions; tests/cuda_emu/translate.py turns `k<<<grid, block, smem,
// stream>>>(args)` into `cuda_emu::launcher(k, grid, block, smem, stream)(args)`. A launch is
// queued on its stream with copies of its arguments, and runs when the host waits for it (see
// StreamQueue in emu.cpp). Blocks run one after another; the threads of a block are fibers
// switched at __syncthreads and shuffles, so __shared__ variables can be function statics
// (filled with NaN bytes at each block's start, see fresh_shared).
#pragma once
#include <math.h>

#include <algorithm>
#include <functional>

#include "cuda_bf16.h"
#include "cuda_fp16.h"
#include "cuda_runtime_api.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __restrict__ __restrict
#define __launch_bounds__(...)  // occupancy hints mean nothing here
// Kernels compiled for the emulation (kernels/cuda_launch.cuh calls grid_dependency_wait below).
#define KVSCOPE_CUDA_EMU_DEVICE 1

// Set by the emulator before it resumes each CUDA thread (all run on the launching thread).
extern uint3 threadIdx;
extern uint3 blockIdx;
extern dim3 blockDim;
extern dim3 gridDim;

using std::max;
using std::min;

namespace cuda_emu {

void sync_block();
float shfl_xor(float v, int lane_mask);
// cudaGridDependencySynchronize: a stream's kernels run one after another here, so it only notes
// that the calling thread waited (an overlapped launch fails with cudaErrorLaunchFailure unless
// all of them do).
void grid_dependency_wait();
// Fills a __shared__ array with NaN bytes, once per block (translate.py calls it after each
// declaration): __shared__ arrays are function statics here, which would otherwise hand a block
// the previous block's values where a GPU has none.
void fresh_shared(void* array, std::size_t bytes);
// Queues on `stream` a run of body once per CUDA thread of every block of the grid (an invalid
// grid or block fails the launch at once). overlapped: launched to overlap the kernel before it
// (every thread must call grid_dependency_wait).
void run_grid(dim3 grid, dim3 block, std::function<void()> body, cudaStream_t stream, bool overlapped = false);

template <class... Params>
struct Launch {
  void (*kernel)(Params...);
  dim3 grid, block;
  cudaStream_t stream;
  template <class... Args>
  void operator()(Args&&... args) const {
    run_grid(grid, block, [k = kernel, ... a = static_cast<Params>(args)] { k(a...); }, stream);
  }
};

template <class... Params>
Launch<Params...> launcher(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t = 0,
                           cudaStream_t stream = nullptr) {
  return {kernel, grid, block, stream};
}

}  // namespace cuda_emu

template <class... Params, class... Args>
cudaError_t cudaLaunchKernelEx(const cudaLaunchConfig_t* config, void (*kernel)(Params...), Args&&... args) {
  bool overlapped = false;
  for (unsigned i = 0; i < config->numAttrs; ++i) {
    const cudaLaunchAttribute& a = config->attrs[i];
    if (a.id == cudaLaunchAttributeProgrammaticStreamSerialization) {
      overlapped = a.val.programmaticStreamSerializationAllowed != 0;
    } else if (a.id != cudaLaunchAttributeIgnore) {
      return cudaErrorInvalidValue;
    }
  }
  cuda_emu::run_grid(config->gridDim, config->blockDim, [k = kernel, ... a = static_cast<Params>(args)] { k(a...); },
                     config->stream, overlapped);
  return cudaPeekAtLastError();
}

inline void __syncthreads() { cuda_emu::sync_block(); }
inline float __shfl_xor_sync(unsigned, float v, int lane_mask) { return cuda_emu::shfl_xor(v, lane_mask); }
// Fibers switch only at __syncthreads and shuffles, so a plain read-add-write is atomic here (exact).
inline int atomicAdd(int* address, int val) {
  const int old = *address;
  *address = old + val;
  return old;
}
// The bits of a float as an unsigned int.
inline unsigned __float_as_uint(float v) {
  unsigned u;
  __builtin_memcpy(&u, &v, sizeof u);
  return u;
}
// Operations rounded on their own: plain ones here, in files built without contraction (CMakeLists).
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
// Loads through the read-only cache and streaming loads: plain loads on the host.
template <class T>
T __ldg(const T* p) { return *p; }
template <class T>
T __ldcs(const T* p) { return *p; }
