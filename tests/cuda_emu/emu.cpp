// CUDA emulator (tests only): the runtime API, the kernel launch machinery and the cuBLAS
// calls of include/*.h, on the CPU. See include/cuda_runtime_api.h.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <vector>

#include "cublas_v2.h"
#include "cuda_runtime.h"
#include "kernels/quant.h"

// Streams. Work queued on a stream (kernels, asynchronous copies and memsets, cuBLAS calls, waits
// for events) runs only when the host has to wait for it: a synchronize call, a synchronous copy
// on the legacy stream, cudaFree, or another stream's wait for an event behind it. On a GPU it may
// run any time from its launch to then; running it as late as the CUDA rules allow makes a host
// that reads a copy's pinned destination before waiting for the copy, rewrites a copy's pinned
// source before the copy ran, or lets one stream use what another stream has not finished, get
// the wrong bytes here, in a test, as it may on a GPU.
struct StreamQueue {
  bool blocking = false;  // created without cudaStreamNonBlocking: ordered with the legacy stream
  std::deque<std::function<void()>> pending;
  unsigned long queued = 0;   // operations queued so far
  unsigned long started = 0;  // operations taken from the queue (run or running)
};
struct CUstream_st {
  std::shared_ptr<StreamQueue> q;
};
struct CUevent_st {
  bool timing = true;              // created without cudaEventDisableTiming
  std::shared_ptr<StreamQueue> q;  // the stream of the last cudaEventRecord (none: never recorded)
  unsigned long at = 0;            // operations of q up to the event's own
  // When the event's operation ran, for cudaEventElapsedTime (shared with the queued operation,
  // which may outlive a re-record of the event).
  std::shared_ptr<std::optional<std::chrono::steady_clock::time_point>> ran;
};
struct cublasContext {
  cudaStream_t stream = nullptr;
};

uint3 threadIdx;
uint3 blockIdx;
dim3 blockDim;
dim3 gridDim;

namespace {

cudaError_t g_last_error = cudaSuccess;  // sticky until cudaGetLastError
std::mutex g_alloc_mutex;
std::map<void*, std::size_t> g_device_allocs;  // pointer -> bytes
std::map<void*, std::size_t> g_pinned_allocs;  // cudaMallocHost: pointer -> bytes
std::size_t g_device_used = 0;

// Whether p lies in one of the allocations (pointer -> bytes); the caller holds g_alloc_mutex.
bool inside(const std::map<void*, std::size_t>& allocs, const void* p) {
  auto it = allocs.upper_bound(const_cast<void*>(p));
  if (it == allocs.begin()) return false;
  --it;
  return static_cast<const char*>(p) < static_cast<const char*>(it->first) + it->second;
}

// An error of queued work as it ran (a launch failure): sticky, as on a GPU, returned by every
// synchronize call until cudaGetLastError returns it (on a GPU it never clears; here the next
// test in the process may go on).
cudaError_t g_run_error = cudaSuccess;

cudaError_t fail(cudaError_t err) {
  g_last_error = err;
  return err;
}

// The CUDA threads of the block being run, as fibers on the calling thread: each runs until it
// reaches __syncthreads or a shuffle, or ends; the scheduler resumes them round-robin and
// releases a barrier once every live thread of its block (or warp) waits at it. The switch is
// the x86-64 System V one: callee-saved registers on the old stack, then the stack pointer.
extern "C" void cuda_emu_switch(void** save_sp, void* load_sp);
asm(R"(
  .text
  .globl cuda_emu_switch
  .type cuda_emu_switch, @function
cuda_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size cuda_emu_switch, .-cuda_emu_switch
)");

// Under AddressSanitizer every switch is announced, so that ASan knows which stack is live (the
// sanitizer build runs the emulated tests too: out-of-bounds "device" accesses become ASan
// reports, as compute-sanitizer's memcheck would give on a GPU).
#if defined(__SANITIZE_ADDRESS__)
#define CUDA_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CUDA_EMU_ASAN 1
#endif
#endif
#ifdef CUDA_EMU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
void start_switch(void** fake_stack_save, const void* bottom, std::size_t size) {
  __sanitizer_start_switch_fiber(fake_stack_save, bottom, size);
}
void finish_switch(void* fake_stack_save, const void** bottom_old, std::size_t* size_old) {
  __sanitizer_finish_switch_fiber(fake_stack_save, bottom_old, size_old);
}
void unpoison_stack(std::vector<char>& stack) { ASAN_UNPOISON_MEMORY_REGION(stack.data(), stack.size()); }
#else
void start_switch(void**, const void*, std::size_t) {}
void finish_switch(void*, const void**, std::size_t*) {}
void unpoison_stack(std::vector<char>&) {}
#endif

struct Fiber {
  void* sp = nullptr;  // saved stack pointer while not running
  void* fake_stack = nullptr;  // ASan's fake stack of this fiber while it is switched out
  uint3 idx{};
  enum State { Ready, AtBlockBarrier, AtWarpBarrier, Done } state = Ready;
  bool waited = false;  // called cudaGridDependencySynchronize's twin (grid_dependency_wait)
};
struct BlockRun {
  int n = 0;
  std::vector<Fiber> fibers;              // [n]
  std::vector<std::vector<char>> stacks;  // [n] fiber stacks, reused across blocks
  // [n] ASan's fake stack of each stack slot, handed from a finished fiber to the next one there
  // (a fiber started with none gets a fresh mapping and its end unmaps it: with
  // detect_stack_use_after_return, that mmap/munmap per CUDA thread was most of a test's time)
  std::vector<void*> fake_stacks;
  // Every fiber of the last block run on these stacks returned, so no frame is left poisoned
  // (unpoisoning every CUDA thread's stack for every block was a tenth of an emulated test's time
  // under ASan).
  bool stacks_clean = true;
  std::vector<float> xchg[2];             // [n] each: shuffle values, alternating per shuffle
  std::vector<int> shuffles;              // [n] shuffles each thread has done
  void* scheduler_sp = nullptr;
  void* scheduler_fake_stack = nullptr;  // ASan bookkeeping of the scheduler's stack
  const void* scheduler_bottom = nullptr;
  std::size_t scheduler_size = 0;
  int current = -1;
  const std::function<void()>* body = nullptr;
  std::vector<const void*> fresh;  // the __shared__ arrays fresh_shared has filled for this block
};
BlockRun g_run;
constexpr std::size_t kFiberStack = 80 * 1024;  // 64 KB for a CUDA thread's frames, 16 KB for the offset below

void yield_to_scheduler(Fiber::State state) {
  Fiber& f = g_run.fibers[g_run.current];
  f.state = state;
  start_switch(&f.fake_stack, g_run.scheduler_bottom, g_run.scheduler_size);
  cuda_emu_switch(&f.sp, g_run.scheduler_sp);
  finish_switch(f.fake_stack, &g_run.scheduler_bottom, &g_run.scheduler_size);
}

[[noreturn]] void fiber_main() {
  finish_switch(g_run.fake_stacks[g_run.current], &g_run.scheduler_bottom, &g_run.scheduler_size);
  (*g_run.body)();
  Fiber& f = g_run.fibers[g_run.current];
  f.state = Fiber::Done;
  // Never resumed; its fake stack (all frames returned) is kept for the slot's next fiber.
  start_switch(&g_run.fake_stacks[g_run.current], g_run.scheduler_bottom, g_run.scheduler_size);
  cuda_emu_switch(&f.sp, g_run.scheduler_sp);
  std::abort();
}

// A fresh fiber's stack: six zero registers for the switch to pop, then fiber_main as the return
// address, then a dummy slot so that fiber_main starts with the ABI's stack alignment. Thread t's
// stack starts 320·t bytes (mod 16 KB) below its top: with the stacks allocated 64 KB apart, the
// frames of a block's threads, resumed in turn at every shuffle, fell in the same few cache sets
// and evicted each other (an emulated test ran 22% longer).
void* initial_stack(std::vector<char>& stack, int t) {
  const std::size_t offset = static_cast<std::size_t>(t) * 320 % 16384;
  auto top = reinterpret_cast<std::uintptr_t>(stack.data() + stack.size() - offset) & ~std::uintptr_t{15};
  auto* slot = reinterpret_cast<void**>(top);
  *--slot = nullptr;                                        // fiber_main's "return address"
  *--slot = reinterpret_cast<void*>(&fiber_main);           // popped by the switch's ret
  for (int r = 0; r < 6; ++r) *--slot = nullptr;            // rbp rbx r12 r13 r14 r15
  return slot;
}

// The order in which the scheduler below resumes a block's threads. On a GPU the warps of a block
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

// Runs one block to completion. Throws on a barrier that can never be released. Returns whether
// every thread called grid_dependency_wait.
bool run_block(int n, const std::function<void()>& body, dim3 block, Schedule order) {
  BlockRun& r = g_run;
  r.n = n;
  r.body = &body;
  r.fibers.assign(n, Fiber{});
  if (static_cast<int>(r.stacks.size()) < n) {
    r.stacks.resize(n);
    r.fake_stacks.resize(n, nullptr);
  }
  r.fresh.clear();
  r.xchg[0].assign(n, 0.0f);
  r.xchg[1].assign(n, 0.0f);
  r.shuffles.assign(n, 0);
  if (!r.stacks_clean)  // a block left unfinished (a barrier that could not complete) left frames poisoned
    for (std::vector<char>& stack : r.stacks) unpoison_stack(stack);
  r.stacks_clean = false;
  for (int t = 0; t < n; ++t) {
    r.stacks[t].resize(kFiberStack);
    r.fibers[t].sp = initial_stack(r.stacks[t], t);
    r.fibers[t].idx = {t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
  }
  const int n_warps = (n + 31) / 32;
  // How many threads wait at each barrier or have returned, counted as they come back to the
  // scheduler (scanning every thread after each round was a tenth of an emulated test's time
  // under ASan).
  std::vector<int> at_warp(n_warps, 0), done_in_warp(n_warps, 0);  // [n_warps]
  int at_block = 0, done = 0;
  // Resumes every ready thread of warp w once; returns whether any ran.
  auto run_warp = [&](int w) {
    const int b = w * 32, e = std::min(n, b + 32);
    bool ran = false;
    for (int i = b; i < e; ++i) {
      const int t = order.descending ? b + e - 1 - i : i;
      if (r.fibers[t].state != Fiber::Ready) continue;
      r.current = t;
      threadIdx = r.fibers[t].idx;
      start_switch(&r.scheduler_fake_stack, r.stacks[t].data(), kFiberStack);
      cuda_emu_switch(&r.scheduler_sp, r.fibers[t].sp);
      finish_switch(r.scheduler_fake_stack, nullptr, nullptr);
      switch (r.fibers[t].state) {
        case Fiber::AtWarpBarrier: ++at_warp[w]; break;
        case Fiber::AtBlockBarrier: ++at_block; break;
        case Fiber::Done: ++done_in_warp[w], ++done; break;
        case Fiber::Ready: break;  // a fiber leaves the scheduler only to wait or return
      }
      ran = true;
    }
    return ran;
  };
  // Releases warp w's barrier once every live thread of it waits there; returns whether it did.
  // The shuffles name the whole warp (mask 0xffffffff): one that some lanes returned before is
  // undefined on a GPU, and an error here.
  auto release_warp = [&](int w) {
    const int b = w * 32, e = std::min(n, b + 32);
    if (at_warp[w] == 0 || at_warp[w] + done_in_warp[w] < e - b) return false;
    if (done_in_warp[w] > 0) throw std::runtime_error("cuda_emu: a warp shuffle after some lanes of the warp returned");
    for (int t = b; t < e; ++t) r.fibers[t].state = Fiber::Ready;
    at_warp[w] = 0;
    return true;
  };
  while (true) {
    bool progressed = false;
    for (int i = 0; i < n_warps; ++i) {
      const int w = order.descending ? n_warps - 1 - i : i;
      bool moved = false;
      do {
        moved = run_warp(w);
        moved = release_warp(w) || moved;
        progressed = progressed || moved;
      } while (order.warp_by_warp && moved);
    }
    // Release the block barrier every live thread has reached.
    if (at_block > 0 && at_block + done == n) {
      for (Fiber& f : r.fibers)
        if (f.state == Fiber::AtBlockBarrier) f.state = Fiber::Ready;
      at_block = 0;
      progressed = true;
    }
    if (done == n) {
      r.stacks_clean = true;
      return std::all_of(r.fibers.begin(), r.fibers.end(), [](const Fiber& f) { return f.waited; });
    }
    if (!progressed) throw std::runtime_error("cuda_emu: threads of a block wait at barriers that cannot complete");
  }
}

int thread_rank() { return g_run.current; }

}  // namespace

__half __float2half_rn(float f) { return __half{kvs::fp32_to_fp16(f)}; }
float __half2float(__half h) { return kvs::fp16_to_fp32(h.bits); }
__nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16{kvs::fp32_to_bf16(f)}; }
float __bfloat162float(__nv_bfloat16 h) { return kvs::bf16_to_fp32(h.bits); }

// ---- kernels

namespace cuda_emu {

void sync_block() { yield_to_scheduler(Fiber::AtBlockBarrier); }

// One barrier per shuffle: successive shuffles use alternate buffers, and a lane cannot reach the
// shuffle after next (which reuses this buffer) before every lane has passed the next barrier,
// that is, has read this one.
float shfl_xor(float v, int lane_mask) {
  const int rank = thread_rank(), warp = rank / 32, lane = rank % 32;
  std::vector<float>& buf = g_run.xchg[g_run.shuffles[rank]++ & 1];
  buf[rank] = v;
  yield_to_scheduler(Fiber::AtWarpBarrier);
  return buf[warp * 32 + (lane ^ lane_mask)];
}

void grid_dependency_wait() { g_run.fibers[thread_rank()].waited = true; }

// The first thread of the block to reach the array's declaration fills it: no thread can have
// written it before then.
void fresh_shared(void* array, std::size_t bytes) {
  std::vector<const void*>& fresh = g_run.fresh;
  if (std::find(fresh.begin(), fresh.end(), array) != fresh.end()) return;
  fresh.push_back(array);
  std::memset(array, 0xFF, bytes);  // NaN as float, fp16 and bf16; -1 as an integer
}

// Runs body over every block of the grid (queued work, see StreamQueue).
void run_blocks(dim3 grid, dim3 block, const std::function<void()>& body, bool overlapped) {
  const int n = static_cast<int>(block.x * block.y * block.z);
  blockDim = block;
  gridDim = grid;
  // On a GPU the blocks of a grid run in no set order either: a block that reads another block's
  // output races with it. Every other launch runs its blocks last to first, and successive blocks
  // take the four thread schedules in turn (starting with the launch's count), so that a race
  // gives a wrong result, in a twin test, under some of the orders.
  static unsigned long launches = 0;
  const bool blocks_reversed = launches++ % 2 == 1;
  const unsigned long n_blocks = static_cast<unsigned long>(grid.x) * grid.y * grid.z;
  for (unsigned long i = 0; i < n_blocks; ++i) {
    const unsigned long b = blocks_reversed ? n_blocks - 1 - i : i;
    blockIdx = {static_cast<unsigned>(b % grid.x), static_cast<unsigned>(b / grid.x % grid.y),
                static_cast<unsigned>(b / (static_cast<unsigned long>(grid.x) * grid.y))};
    const unsigned long turn = (b + launches) % 4;
    const Schedule order{turn % 2 == 1, turn >= 2};
    // Launched to overlap the kernel before it, a thread that never waits for that kernel
    // may read its outputs before they are written (on a GPU; here kernels run in order).
    if (!run_block(n, body, block, order) && overlapped) {
      fail(cudaErrorLaunchFailure);
      g_run_error = cudaErrorLaunchFailure;
    }
  }
}

}  // namespace cuda_emu

// ---- stream queues (see StreamQueue)

namespace {

std::recursive_mutex g_stream_mutex;  // the queues, and the emulated GPU that runs their work
const std::shared_ptr<StreamQueue> g_legacy = std::make_shared<StreamQueue>(StreamQueue{true});
std::vector<std::shared_ptr<StreamQueue>> g_streams;  // the streams created and not destroyed

std::shared_ptr<StreamQueue> queue_of(cudaStream_t s) { return s ? s->q : g_legacy; }

// Runs q's operations until `upto` of them have been taken.
void drain(StreamQueue& q, unsigned long upto) {
  while (q.started < upto && !q.pending.empty()) {
    std::function<void()> op = std::move(q.pending.front());
    q.pending.pop_front();
    ++q.started;
    op();
  }
}

void push(StreamQueue& q, std::function<void()> op) {
  q.pending.push_back(std::move(op));
  ++q.queued;
}

// An operation of q that waits for the first `at` operations of `other`.
void push_wait(StreamQueue& q, const std::shared_ptr<StreamQueue>& other, unsigned long at) {
  push(q, [other, at] { drain(*other, at); });
}

// Queues op on stream s. The legacy stream waits for the blocking streams' earlier work, and a
// blocking stream for the legacy stream's; non-blocking streams for nothing.
void enqueue(cudaStream_t s, std::function<void()> op) {
  const std::shared_ptr<StreamQueue> q = queue_of(s);
  if (q == g_legacy) {
    for (const auto& b : g_streams)
      if (b->blocking && b->started < b->queued) push_wait(*q, b, b->queued);
  } else if (q->blocking && g_legacy->started < g_legacy->queued) {
    push_wait(*q, g_legacy, g_legacy->queued);
  }
  push(*q, std::move(op));
}

// Runs everything queued on every stream (cudaDeviceSynchronize, and cudaFree's wait).
cudaError_t synchronize_all() {
  std::lock_guard<std::recursive_mutex> lock(g_stream_mutex);
  drain(*g_legacy, g_legacy->queued);
  for (const auto& q : g_streams) drain(*q, q->queued);
  return g_run_error;
}

}  // namespace

namespace cuda_emu {

void run_grid(dim3 grid, dim3 block, std::function<void()> body, cudaStream_t stream, bool overlapped) {
  const long n = static_cast<long>(block.x) * block.y * block.z;
  if (n < 1 || n > 1024 || grid.x < 1 || grid.y < 1 || grid.z < 1 || grid.y > 65535 || grid.z > 65535) {
    fail(cudaErrorInvalidConfiguration);
    return;
  }
  std::lock_guard<std::recursive_mutex> lock(g_stream_mutex);
  enqueue(stream, [grid, block, body = std::move(body), overlapped] { run_blocks(grid, block, body, overlapped); });
}

}  // namespace cuda_emu

// ---- runtime

cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (device != 0) return fail(cudaErrorInvalidValue);
  *prop = {};
  std::strncpy(prop->name, "CUDA emulation on the CPU", sizeof prop->name - 1);
  prop->totalGlobalMem = cuda_emu::kDeviceBytes;
  prop->multiProcessorCount = 1;
  return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int* version) {
  *version = 13000;  // the API subset emulated is CUDA 13.0's
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int* version) { return cudaRuntimeGetVersion(version); }

// The emulated GPU claims compute capability 9.0, so that overlapped launches run (and are
// checked) here as they would on an H100.
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (device != 0) return fail(cudaErrorInvalidValue);
  switch (attr) {
    case cudaDevAttrComputeCapabilityMajor: *value = 9; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMinor: *value = 0; return cudaSuccess;
  }
  return fail(cudaErrorInvalidValue);
}

cudaError_t cudaPeekAtLastError() { return g_last_error; }

cudaError_t cudaGetLastError() {
  const cudaError_t e = g_last_error;
  g_last_error = cudaSuccess;
  g_run_error = cudaSuccess;
  return e;
}

const char* cudaGetErrorString(cudaError_t err) {
  switch (err) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInsufficientDriver: return "CUDA driver version is insufficient for CUDA runtime version";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorLaunchFailure:
      return "unspecified launch failure (emulation: a thread of an overlapped launch never called "
             "cudaGridDependencySynchronize)";
  }
  return "unknown error";
}

cudaError_t cudaMalloc(void** p, std::size_t bytes) {
  std::lock_guard<std::mutex> lock(g_alloc_mutex);
  if (bytes > cuda_emu::kDeviceBytes - g_device_used) return fail(cudaErrorMemoryAllocation);
  // Exactly `bytes` (256-aligned like cudaMalloc's): under ASan, a kernel reading one element
  // past a buffer is reported.
  if (posix_memalign(p, 256, bytes == 0 ? 1 : bytes) != 0) return fail(cudaErrorMemoryAllocation);
  g_device_allocs[*p] = bytes;
  g_device_used += bytes;
  return cudaSuccess;
}

// Like cudaFree on a GPU, waits for all queued work first (it may still use the buffer).
cudaError_t cudaFree(void* p) {
  if (!p) return cudaSuccess;
  synchronize_all();
  std::lock_guard<std::mutex> lock(g_alloc_mutex);
  const auto it = g_device_allocs.find(p);
  if (it == g_device_allocs.end()) return fail(cudaErrorInvalidValue);
  g_device_used -= it->second;
  g_device_allocs.erase(it);
  std::free(p);
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void** p, std::size_t bytes) {
  *p = std::malloc(bytes);
  if (!*p) return fail(cudaErrorMemoryAllocation);
  std::lock_guard<std::mutex> lock(g_alloc_mutex);
  g_pinned_allocs[*p] = bytes;
  return cudaSuccess;
}

// Like cudaFreeHost on a GPU, waits for all queued work first.
cudaError_t cudaFreeHost(void* p) {
  if (!p) return cudaSuccess;
  synchronize_all();
  std::lock_guard<std::mutex> lock(g_alloc_mutex);
  g_pinned_allocs.erase(p);
  std::free(p);
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(std::size_t* free_bytes, std::size_t* total_bytes) {
  std::lock_guard<std::mutex> lock(g_alloc_mutex);
  *free_bytes = cuda_emu::kDeviceBytes - g_device_used;
  *total_bytes = cuda_emu::kDeviceBytes;
  return cudaSuccess;
}

// A synchronous copy runs on the legacy stream: after its earlier work (and, through it, the
// blocking streams'), not after the non-blocking streams'.
cudaError_t cudaMemcpy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind) {
  std::lock_guard<std::recursive_mutex> lock(g_stream_mutex);
  enqueue(nullptr, [dst, src, bytes] { if (bytes) std::memmove(dst, src, bytes); });
  drain(*g_legacy, g_legacy->queued);
  return g_run_error;
}

namespace {

// An asynchronous copy reads its source when it runs, except from pageable host memory (neither
// device nor pinned), which the driver stages before the call returns.
std::function<void()> copy_op(void* dst, const void* src, std::size_t dpitch, std::size_t spitch, std::size_t width,
                              std::size_t height) {
  bool pageable = false;
  {
    std::lock_guard<std::mutex> lock(g_alloc_mutex);
    pageable = !inside(g_device_allocs, src) && !inside(g_pinned_allocs, src);
  }
  auto copy = [dst, dpitch, width, height](const char* from, std::size_t pitch) {
    for (std::size_t r = 0; r < height; ++r) std::memmove(static_cast<char*>(dst) + r * dpitch, from + r * pitch, width);
  };
  if (!pageable) return [copy, src, spitch] { copy(static_cast<const char*>(src), spitch); };
  auto staged = std::make_shared<std::vector<char>>(height ? (height - 1) * spitch + width : 0);
  if (!staged->empty()) std::memcpy(staged->data(), src, staged->size());
  return [copy, staged, spitch] { copy(staged->data(), spitch); };
}

}  // namespace

cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind, cudaStream_t stream) {
  if (!bytes) return cudaSuccess;
  std::lock_guard<std::recursive_mutex> lock(g_stream_mutex);
  enqueue(stream, copy_op(dst, src, bytes, bytes, bytes, 1));
  return cudaSuccess;
}

cudaError_t cudaMemcpy2DAsync(void* dst, std::size_t dpitch, const void* src, std::size_t spitch, std::size_t width,
                              std::size_t height, cudaMemcpyKind, cudaStream_t stream) {
  if (width > dpitch || width > spitch) return fail(cudaErrorInvalidValue);
  if (!width || !height) return cudaSuccess;
  std::lock_guard<std::recursive_mutex> lock(g_stream_mutex);
  enqueue(stream, copy_op(dst, src, dpitch, spitch, width, height));
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* p, int value, std::size_t bytes, cudaStream_t stream) {
  std::lock_guard<std::recursive_mutex> lock(g_stream_mutex);
  enqueue(stream, [p, value, bytes] { std::memset(p, value, bytes); });
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags) {
  std::lock_guard<std::recursive_mutex> lock(g_stream_mutex);
  auto q = std::make_shared<StreamQueue>();
  q->blocking = (flags & cudaStreamNonBlocking) == 0;
  g_streams.push_back(q);
  *stream = new CUstream_st{q};
  return cudaSuccess;
}

// On a GPU the stream's queued work still completes; here it runs now.
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (!stream) return fail(cudaErrorInvalidValue);
  std::lock_guard<std::recursive_mutex> lock(g_stream_mutex);
  drain(*stream->q, stream->q->queued);
  g_streams.erase(std::find(g_streams.begin(), g_streams.end(), stream->q));
  delete stream;
  return g_run_error;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  std::lock_guard<std::recursive_mutex> lock(g_stream_mutex);
  const auto q = queue_of(stream);
  drain(*q, q->queued);
  return g_run_error;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned) {
  if (!event) return fail(cudaErrorInvalidValue);
  std::lock_guard<std::recursive_mutex> lock(g_stream_mutex);
  if (event->q) enqueue(stream, [q = event->q, at = event->at] { drain(*q, at); });
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() {
  return synchronize_all();
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned flags) {
  *event = new CUevent_st;
  (*event)->timing = (flags & cudaEventDisableTiming) == 0;
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) { return cudaEventCreateWithFlags(event, 0); }

// The event is an operation of the stream that notes when it ran.
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (!event) return fail(cudaErrorInvalidValue);
  std::lock_guard<std::recursive_mutex> lock(g_stream_mutex);
  event->ran = std::make_shared<std::optional<std::chrono::steady_clock::time_point>>();
  enqueue(stream, [ran = event->ran] { *ran = std::chrono::steady_clock::now(); });
  event->q = queue_of(stream);
  event->at = event->q->queued;
  return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t stop) {
  if (!start || !stop || !start->timing || !stop->timing) return fail(cudaErrorInvalidResourceHandle);
  std::lock_guard<std::recursive_mutex> lock(g_stream_mutex);
  if (!start->ran || !stop->ran) return fail(cudaErrorInvalidResourceHandle);  // never recorded
  if (!*start->ran || !*stop->ran) return fail(cudaErrorNotReady);
  *ms = std::chrono::duration<float, std::milli>(**stop->ran - **start->ran).count();
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (!event) return fail(cudaErrorInvalidValue);
  std::lock_guard<std::recursive_mutex> lock(g_stream_mutex);
  if (event->q) drain(*event->q, event->at);
  return g_run_error;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete event;
  return cudaSuccess;
}

// ---- cuBLAS

cublasStatus_t cublasCreate(cublasHandle_t* handle) {
  *handle = new cublasContext;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

const char* cublasGetStatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
  }
  return "unknown cuBLAS status";
}

namespace {

float load(const void* p, cudaDataType_t t, long long i) {
  switch (t) {
    case CUDA_R_16F: return __half2float(static_cast<const __half*>(p)[i]);
    case CUDA_R_16BF: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    default: return static_cast<const float*>(p)[i];
  }
}

std::size_t element_bytes(cudaDataType_t t) { return t == CUDA_R_16F || t == CUDA_R_16BF ? 2 : 4; }

// op(X) as a row-major [rows, k] float matrix: element (r, p) of op(X) where X is column-major
// with leading dimension ld (op = transpose when trans).
std::vector<float> op_rows(const void* x, cudaDataType_t t, int ld, bool trans, int rows, int k) {
  std::vector<float> out(static_cast<std::size_t>(rows) * k);
  for (int r = 0; r < rows; ++r)
    for (int p = 0; p < k; ++p)
      out[static_cast<std::size_t>(r) * k + p] =
          load(x, t, trans ? static_cast<long long>(r) * ld + p : static_cast<long long>(p) * ld + r);
  return out;
}

// C = alpha op(A) op(B) + beta C, with C float (check_args has passed).
void gemm_one(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float alpha, const void* A,
              cudaDataType_t at, int lda, const void* B, cudaDataType_t bt, int ldb, float beta, float* c, int ldc) {
  // op(A) is [m, k], op(B) is [k, n]; C is column-major [m, n] (ldc >= m).
  const std::vector<float> a = op_rows(A, at, lda, ta == CUBLAS_OP_T, m, k);  // [m, k]
  const std::vector<float> b = op_rows(B, bt, ldb, tb == CUBLAS_OP_N, n, k);  // [n, k]: column j of op(B)
#pragma omp parallel for schedule(static)
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i) {
      const float* ar = a.data() + static_cast<std::size_t>(i) * k;
      const float* br = b.data() + static_cast<std::size_t>(j) * k;
      float s = 0.0f;
      for (int p = 0; p < k; ++p) s += ar[p] * br[p];
      float& out = c[static_cast<std::size_t>(j) * ldc + i];
      out = alpha * s + (beta == 0.0f ? 0.0f : beta * out);
    }
}

cublasStatus_t check_args(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, cudaDataType_t at,
                          int lda, cudaDataType_t bt, int ldb, cudaDataType_t ct, int ldc, cublasComputeType_t ctype) {
  if (m < 0 || n < 0 || k < 0) return CUBLAS_STATUS_INVALID_VALUE;
  if (lda < std::max(1, ta == CUBLAS_OP_N ? m : k)) return CUBLAS_STATUS_INVALID_VALUE;
  if (ldb < std::max(1, tb == CUBLAS_OP_N ? k : n)) return CUBLAS_STATUS_INVALID_VALUE;
  if (ldc < std::max(1, m)) return CUBLAS_STATUS_INVALID_VALUE;
  if (at != bt || ct != CUDA_R_32F || ctype != CUBLAS_COMPUTE_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const void* alpha, const void* A, cudaDataType_t Atype, int lda, const void* B,
                            cudaDataType_t Btype, int ldb, const void* beta, void* C, cudaDataType_t Ctype, int ldc,
                            cublasComputeType_t compute, cublasGemmAlgo_t) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (const auto st = check_args(transa, transb, m, n, k, Atype, lda, Btype, ldb, Ctype, ldc, compute); st != CUBLAS_STATUS_SUCCESS)
    return st;
  // Queued on the handle's stream; alpha and beta are host scalars, read now.
  const float a = *static_cast<const float*>(alpha), b = *static_cast<const float*>(beta);
  std::lock_guard<std::recursive_mutex> lock(g_stream_mutex);
  enqueue(handle->stream, [=] {
    gemm_one(transa, transb, m, n, k, a, A, Atype, lda, B, Btype, ldb, b, static_cast<float*>(C), ldc);
  });
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                          int m, int n, int k, const void* alpha, const void* A, cudaDataType_t Atype,
                                          int lda, long long strideA, const void* B, cudaDataType_t Btype, int ldb,
                                          long long strideB, const void* beta, void* C, cudaDataType_t Ctype, int ldc,
                                          long long strideC, int batch_count, cublasComputeType_t compute,
                                          cublasGemmAlgo_t) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (batch_count < 0) return CUBLAS_STATUS_INVALID_VALUE;
  if (const auto st = check_args(transa, transb, m, n, k, Atype, lda, Btype, ldb, Ctype, ldc, compute); st != CUBLAS_STATUS_SUCCESS)
    return st;
  const std::size_t as = element_bytes(Atype), bs = element_bytes(Btype);
  const float a = *static_cast<const float*>(alpha), b = *static_cast<const float*>(beta);
  std::lock_guard<std::recursive_mutex> lock(g_stream_mutex);
  enqueue(handle->stream, [=] {
    for (int i = 0; i < batch_count; ++i)
      gemm_one(transa, transb, m, n, k, a, static_cast<const char*>(A) + i * strideA * as, Atype, lda,
               static_cast<const char*>(B) + i * strideB * bs, Btype, ldb, b, static_cast<float*>(C) + i * strideC,
               ldc);
  });
  return CUBLAS_STATUS_SUCCESS;
}
