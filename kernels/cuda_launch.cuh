// Launches that overlap the kernel before them (programmatic dependent launch, compute
// capability 9.0 and later). A decode step is a chain of short kernels, seven a layer, each
// waiting for the one before; between two of them the GPU drains one grid and ramps up the next.
// Launched through launch_overlapped, a kernel's blocks may start while the previous kernel's
// last blocks still run: they do what needs nothing from earlier kernels (a product asks L2 for
// its first weights), then wait for them (wait_for_previous_kernels). Every thread of such a
// kernel must call wait_for_previous_kernels before it reads or writes memory that an earlier
// kernel of the stream writes or reads (the CUDA emulation checks that every thread calls it);
// each block then calls let_next_kernel_start, which lets the next kernel's blocks start. Without
// a device that supports it, or with the overlap switched off (set_launch_overlap in
// cuda_ops.h), the launch is a plain one and both calls return at once.
#pragma once
#include <cuda_runtime.h>

namespace kvs::cuda::detail {

__device__ __forceinline__ void wait_for_previous_kernels() {
#if defined(KVSCOPE_CUDA_EMU_DEVICE)
  cuda_emu::grid_dependency_wait();
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void let_next_kernel_start() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Asks L2 for the 128-byte line holding p (a hint: no register waits for it). Before
// wait_for_previous_kernels, for data no earlier kernel writes (weights).
__device__ __forceinline__ void prefetch_l2(const void* p) {
#if defined(__CUDA_ARCH__)
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
#else
  (void)p;
#endif
}

// Whether launch_overlapped asks for the overlap: set_launch_overlap's switch (on by default)
// and a device of compute capability 9.0 or later (kernels/launch.cu).
bool overlap_enabled();

// kernel<<<grid, block, 0, stream>>>(args...), overlapping the previous kernel where enabled.
// A failed launch is reported by cudaGetLastError, as for <<<>>>.
template <class... Params, class... Args>
void launch_overlapped(void (*kernel)(Params...), dim3 grid, dim3 block, cudaStream_t stream, Args... args) {
  cudaLaunchAttribute attr[1] = {};
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = 0;
  config.stream = stream;
  config.attrs = attr;
  config.numAttrs = overlap_enabled() ? 1 : 0;
  cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...);
}

}  // namespace kvs::cuda::detail
