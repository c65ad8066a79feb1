// CUDA emulator (tests only): runs one block of CUDA threads as fibers on the calling thread,
// switched at __syncthreads and warp shuffles, in one of four orders (see Schedule).
#pragma once
#include <functional>

#include "cuda_runtime.h"

namespace cuda_emu {

// The order in which run_block resumes a block's threads. On a GPU the warps of a block
// run in no set order between block barriers, and a thread that reads what another thread wrote
// since the last barrier it passed races with it. Run one after another, such a race shows as a
// wrong result in some orders only, so blocks take turns among four:
//   round robin: every ready thread once (ascending or descending), then the barriers;
//   warp by warp: each warp (ascending or descending) runs until all its threads wait at the
//   block barrier or end, passing its warp barriers (shuffles) on its own, before the next warp
//   starts — so one warp gets ahead of the others by whole reductions.
struct Schedule {
  bool descending = false;
  bool warp_by_warp = false;
};

// Runs one block to completion (body once per thread, blockIdx set by the caller). Throws on a
// barrier that can never be released. Returns whether every thread called grid_dependency_wait.
bool run_block(int n, const std::function<void()>& body, dim3 block, Schedule order);

}  // namespace cuda_emu
