// CUDA emulator (tests only): the runtime API, the kernel launch machinery and the cuBLAS
// calls of include/*.h, on the CPU (a block's threads: block_run.h). See
// include/cuda_runtime_api.h.
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
#include "tests/cuda_emu/block_run.h"

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

}  // namespace

__half __float2half_rn(float f) { return __half{kvs::fp32_to_fp16(f)}; }
float __half2float(__half h) { return kvs::fp16_to_fp32(h.bits); }
__nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16{kvs::fp32_to_bf16(f)}; }
float __bfloat162float(__nv_bfloat16 h) { return kvs::bf16_to_fp32(h.bits); }

// ---- kernels

namespace cuda_emu {

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
const std::shared_ptr<StreamQueue> g_legacy = [] {
  auto q = std::make_shared<StreamQueue>();
  q->blocking = true;
  return q;
}();
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
