// CUDA emulator (tests only): a block's CUDA threads as fibers, the scheduler that resumes them
// and what device code calls into it (__syncthreads, shuffles, fresh shared memory). It runs at
// every switch of every emulated thread, so the sanitizer build leaves this file uninstrumented
// (ASan, UBSan and the fuzzers' coverage here were most of an emulated test's time); the
// kernels, the engine and the memory they reach are still checked.
#include "tests/cuda_emu/block_run.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace {

// The CUDA threads of the block being run, as fibers on the calling thread: each runs until it
// reaches __syncthreads or a shuffle, or ends, then hands over to the next ready thread of its
// warp; the scheduler starts each warp's turn in the block's Schedule and releases a barrier once
// every live thread of its block (or warp) waits at it. The switch is the x86-64 System V one:
// callee-saved registers on the old stack, then the stack pointer.
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
// reports, as compute-sanitizer's memcheck would give on a GPU). This file itself is built
// uninstrumented there, with CUDA_EMU_ASAN defined (CMakeLists.txt).
#if defined(__SANITIZE_ADDRESS__) && !defined(CUDA_EMU_ASAN)
#define CUDA_EMU_ASAN 1
#elif defined(__has_feature) && !defined(CUDA_EMU_ASAN)
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
  // Every fiber of the last block run on these stacks returned, so no frame is left poisoned and
  // the next block need not unpoison them (for every CUDA thread of every block, that was a tenth
  // of an emulated test's time under ASan).
  bool stacks_clean = true;
  std::vector<float> xchg[2];             // [n] each: shuffle values, alternating per shuffle
  std::vector<int> shuffles;              // [n] shuffles each thread has done
  // How many threads wait at each barrier or have returned, counted as they leave rather than
  // found by scanning every thread after each round.
  std::vector<int> at_warp, done_in_warp;  // [n_warps]
  int at_block = 0, done = 0;
  bool descending = false;  // the order in which a warp's threads take their turns this block
  void* scheduler_sp = nullptr;
  void* scheduler_fake_stack = nullptr;  // ASan bookkeeping of the scheduler's stack
  const void* scheduler_bottom = nullptr;
  std::size_t scheduler_size = 0;
  bool from_scheduler = false;  // the running fiber was switched to by the scheduler, not a fiber
  int current = -1;
  const std::function<void()>* body = nullptr;
  std::vector<const void*> fresh;  // the __shared__ arrays fresh_shared has filled for this block
};
BlockRun g_run;
constexpr std::size_t kFiberStack = 80 * 1024;  // 64 KB for a CUDA thread's frames, 16 KB for the offset below

// The ready thread of warp w that takes its turn after thread `after` in this round (-1: the
// warp's first), or -1.
int next_ready(int w, int after) {
  const BlockRun& r = g_run;
  const int b = w * 32, e = std::min(r.n, b + 32);
  if (r.descending) {
    for (int i = (after < 0 ? e : after) - 1; i >= b; --i)
      if (r.fibers[i].state == Fiber::Ready) return i;
  } else {
    for (int i = after < 0 ? b : after + 1; i < e; ++i)
      if (r.fibers[i].state == Fiber::Ready) return i;
  }
  return -1;
}

// Resumes fiber t from the scheduler's stack or from another fiber's, whose fake stack (under
// ASan) is kept in *fake_save.
void switch_to(int t, void** from_sp, void** fake_save, bool from_scheduler) {
  BlockRun& r = g_run;
  r.current = t;
  r.from_scheduler = from_scheduler;
  threadIdx = r.fibers[t].idx;
  start_switch(fake_save, r.stacks[t].data(), kFiberStack);
  cuda_emu_switch(from_sp, r.fibers[t].sp);
}

// Where a fiber resumes: tells ASan the stack it runs on again (and, when the scheduler resumed
// it, the scheduler's stack, to switch back to).
void resumed(void* fake_stack) {
  BlockRun& r = g_run;
  if (r.from_scheduler) finish_switch(fake_stack, &r.scheduler_bottom, &r.scheduler_size);
  else finish_switch(fake_stack, nullptr, nullptr);
}

// The running fiber stops at a barrier or ends (state): it is counted there, and the next ready
// thread of its warp takes its turn straight away, as the scheduler would resume it next (one
// switch a thread a shuffle instead of two); after the warp's last, the scheduler.
void leave(Fiber::State state, void** fake_save) {
  BlockRun& r = g_run;
  const int t = r.current, w = t / 32;
  Fiber& f = r.fibers[t];
  f.state = state;
  switch (state) {
    case Fiber::AtWarpBarrier: ++r.at_warp[w]; break;
    case Fiber::AtBlockBarrier: ++r.at_block; break;
    case Fiber::Done: ++r.done_in_warp[w], ++r.done; break;
    case Fiber::Ready: break;  // a fiber leaves only to wait or return
  }
  const int next = next_ready(w, t);
  if (next >= 0) {
    switch_to(next, &f.sp, fake_save, false);
  } else {
    start_switch(fake_save, r.scheduler_bottom, r.scheduler_size);
    cuda_emu_switch(&f.sp, r.scheduler_sp);
  }
}

// The running thread waits at a barrier (state) until the scheduler releases it.
void wait_at(Fiber::State state) {
  Fiber& f = g_run.fibers[g_run.current];
  leave(state, &f.fake_stack);
  resumed(f.fake_stack);
}

[[noreturn]] void fiber_main() {
  resumed(g_run.fake_stacks[g_run.current]);
  (*g_run.body)();
  // Never resumed; its fake stack (all frames returned) is kept for the slot's next fiber.
  leave(Fiber::Done, &g_run.fake_stacks[g_run.current]);
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

int thread_rank() { return g_run.current; }

}  // namespace

namespace cuda_emu {

bool run_block(int n, const std::function<void()>& body, dim3 block, Schedule order) {
  BlockRun& r = g_run;
  r.n = n;
  r.body = &body;
  r.descending = order.descending;
  r.fibers.assign(n, Fiber{});
  if (static_cast<int>(r.stacks.size()) < n) {
    r.stacks.resize(n);
    r.fake_stacks.resize(n, nullptr);
  }
  r.fresh.clear();
  r.xchg[0].assign(n, 0.0f);
  r.xchg[1].assign(n, 0.0f);
  r.shuffles.assign(n, 0);
  const int n_warps = (n + 31) / 32;
  r.at_warp.assign(n_warps, 0);
  r.done_in_warp.assign(n_warps, 0);
  r.at_block = r.done = 0;
  if (!r.stacks_clean)  // a block left unfinished (a barrier that could not complete) left frames poisoned
    for (std::vector<char>& stack : r.stacks) unpoison_stack(stack);
  r.stacks_clean = false;
  for (int t = 0; t < n; ++t) {
    r.stacks[t].resize(kFiberStack);
    r.fibers[t].sp = initial_stack(r.stacks[t], t);
    r.fibers[t].idx = {t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
  }
  // Gives every ready thread of warp w its turn (each hands over to the next, see leave); returns
  // whether any ran.
  auto run_warp = [&](int w) {
    const int first = next_ready(w, -1);
    if (first < 0) return false;
    switch_to(first, &r.scheduler_sp, &r.scheduler_fake_stack, true);
    finish_switch(r.scheduler_fake_stack, nullptr, nullptr);
    return true;
  };
  // Releases warp w's barrier once every live thread of it waits there; returns whether it did.
  // The shuffles name the whole warp (mask 0xffffffff): one that some lanes returned before is
  // undefined on a GPU, and an error here.
  auto release_warp = [&](int w) {
    const int b = w * 32, e = std::min(n, b + 32);
    if (r.at_warp[w] == 0 || r.at_warp[w] + r.done_in_warp[w] < e - b) return false;
    if (r.done_in_warp[w] > 0)
      throw std::runtime_error("cuda_emu: a warp shuffle after some lanes of the warp returned");
    for (int t = b; t < e; ++t) r.fibers[t].state = Fiber::Ready;
    r.at_warp[w] = 0;
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
    if (r.at_block > 0 && r.at_block + r.done == n) {
      for (Fiber& f : r.fibers)
        if (f.state == Fiber::AtBlockBarrier) f.state = Fiber::Ready;
      r.at_block = 0;
      progressed = true;
    }
    if (r.done == n) {
      r.stacks_clean = true;
      return std::all_of(r.fibers.begin(), r.fibers.end(), [](const Fiber& f) { return f.waited; });
    }
    if (!progressed) throw std::runtime_error("cuda_emu: threads of a block wait at barriers that cannot complete");
  }
}

void sync_block() { wait_at(Fiber::AtBlockBarrier); }

// One barrier per shuffle: successive shuffles use alternate buffers, and a lane cannot reach the
// shuffle after next (which reuses this buffer) before every lane has passed the next barrier,
// that is, has read this one.
float shfl_xor(float v, int lane_mask) {
  const int rank = thread_rank(), warp = rank / 32, lane = rank % 32;
  std::vector<float>& buf = g_run.xchg[g_run.shuffles[rank]++ & 1];
  buf[rank] = v;
  wait_at(Fiber::AtWarpBarrier);
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

}  // namespace cuda_emu
