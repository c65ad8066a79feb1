// The transformer forward pass (Llama family, fp32 compute, multi-threaded CPU) with a KV cache
// held per (layer, KV head) so that a CacheController can evict entries for real.
#pragma once
#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "inference/hooks.h"
#include "inference/model.h"

namespace kvs {

// Where the forward pass runs. Cuda needs a CUDA build and a GPU (see cuda_usable()).
enum class Device { Cpu, Cuda };

// The type the CUDA backend stores weights and the KV cache in; it computes in fp32 either way.
// Fp32 stores them as the CPU engine holds them, for attention rows that agree with the CPU's to
// accumulation order (about 1e-5) at twice the bytes of weights and cache a token; Bf16 keeps
// bf16 checkpoints' weights exactly and fp32's range for keys and values that overflow fp16; Fp16
// has three more bits of mantissa than bf16. Auto: auto_gpu_dtype.
enum class GpuDtype { Auto, Fp16, Bf16, Fp32 };
// Models of at most this many bytes of fp32 weights (268M parameters: stories260K, SmolLM2-135M)
// decode on a GPU at the pace of their kernel launches, not of their weights' bytes (SmolLM2-135M:
// 0.54 GB read in ~0.16 ms at 3.35 TB/s against ~1.1 ms of launches a step), so fp32 storage costs
// them little and gives the CPU's rows; Auto stores them in fp32.
inline constexpr std::size_t kAutoFp32MaxBytes = std::size_t{1} << 30;
// What Auto stores a model of `n_params` weights stored on disk as `weight_type` in: Fp32 up to
// kAutoFp32MaxBytes, then Bf16 for bf16 checkpoints (weight_type "BF16..."), Fp16 for the rest.
GpuDtype auto_gpu_dtype(std::string_view weight_type, std::size_t n_params);
// What `asked` means for `model`: Fp16, Bf16 or Fp32 (Auto resolved by auto_gpu_dtype).
GpuDtype resolve_gpu_dtype(const Model& model, GpuDtype asked);
const char* gpu_dtype_name(GpuDtype d);  // "auto", "fp16", "bf16", "fp32"
const char* device_name(Device d);       // "cpu", "cuda"
// The type the CPU engine caches K and V in; it computes in fp32 either way. Fp16 and Bf16 halve
// the cache's memory and the bytes decode reads of it (most of a token's at long contexts),
// rounding each key and value as it enters the cache (fp16: 11 significant bits, bf16: 8 with
// fp32's range); the prompt's attention reads the rounded keys and values too, as decode does.
enum class KvDtype { Fp32, Fp16, Bf16 };
const char* kv_dtype_name(KvDtype d);  // "fp32", "fp16", "bf16"
// The KvDtype named `name` (as kv_dtype_name writes it), or nothing for any other text.
std::optional<KvDtype> parse_kv_dtype(std::string_view name);

// What `model` on `device` stores its cache in (on a GPU its weights too): on the CPU the name of
// kv, on a GPU the name of resolve_gpu_dtype(model, asked).
const char* storage_name(const Model& model, Device device, GpuDtype asked, KvDtype kv = KvDtype::Fp32);
// The GpuDtype named `name` (as gpu_dtype_name writes it), or nothing for any other text.
std::optional<GpuDtype> parse_gpu_dtype(std::string_view name);

struct EngineOptions {
  Device device = Device::Cpu;
  // Threads of prefill and decode. 0 = all hardware threads, except that models under 4 MB of
  // weights per token decode on one.
  int n_threads = 0;
  int prefill_block = 0;       // query rows per attention block (handed to observers as one in
                               // prefill); 0 = the default: 72 on the CPU, four of the attention
                               // kernel's groups of 18 rows; on the GPU as many as its memory
                               // budget allows, which a value > 0 caps (prefill and extend)
  // Keys are cached before RoPE and rotated by their slot index inside the cache at every
  // attention; the query is rotated by the number of held keys (the pos-shift of POLICIES.md §1).
  bool rope_in_cache = false;
  // CUDA: the storage type of weights and cache.
  GpuDtype gpu_dtype = GpuDtype::Auto;
  // CPU: the type of the KV cache (KvDtype). Fp16 and Bf16 also hold the numbers the CUDA
  // backend's fp16 or bf16 cache holds, so the two backends compare like for like.
  KvDtype kv_dtype = KvDtype::Fp32;
};

class KvStore;      // per-(layer, KV head) K/V storage; see kv_store.h
// The state a prefill left an engine in (Engine::snapshot_prefill); defined in engine_snapshot.cpp.
struct PrefillSnapshot;
class DecodeTeam;   // the threads of one decode step; see decode_team.h
class CudaBackend;  // the forward pass on a GPU; see cuda_backend.h

class Engine {
 public:
  explicit Engine(const Model& model, EngineOptions options = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  void set_observer(AttentionObserver* observer);      // nullptr = no capture
  void set_controller(CacheController* controller);    // nullptr = full cache

  // Starts a new sequence (empties the cache).
  void reset();
  // Processes the prompt at positions 0..n-1 with full attention in every layer, then lets the
  // controller compress it. Returns the next-token logits [vocab]. Throws InputError when the
  // prompt is empty or longer than the context.
  std::span<const float> prefill(std::span<const int> tokens);
  // Feeds one token at position pos(); returns the next-token logits [vocab]. When a hook throws,
  // the token is not fed (the cache is as before the call) and the exception passes on.
  std::span<const float> decode(int token);
  // Feeds tokens at positions pos()..pos()+n-1 in one batched pass over the cache (a chunk of
  // text after a prompt, faster than n decode steps). Hooks:
  //  - the controller's before_attention runs once a layer, q_pos = the chunk's first position,
  //    every key of the chunk held and active; after_attention is not called (nothing is evicted
  //    inside a chunk). So a controller whose marks depend on positions alone (say, the first
  //    few keys, a span of the prompt and everything after it) gives each query the keys decode
  //    steps would; one that evicts as it goes, or counts back from the query, does not.
  //  - observers get on_token for the chunk's tokens, each query's row as a decode row (n_q = 1
  //    over the keys it read), then the last token's logits (returned, [vocab]). The rows come
  //    layer by layer (a layer's every head and query before the next layer), not step by step,
  //    so an observer that wants whole steps in turn (the trace recorder) is not for extend.
  // On the GPU the same batched pass (inference/cuda_extend.cpp); with rope_in_cache it feeds n
  // decode steps underneath, the hooks given the same calls (rows then step by step). All or
  // nothing: when a hook throws, the chunk is not fed.
  // Throws InputError when tokens is empty, has an id outside the vocabulary, or runs past the
  // context.
  std::span<const float> extend(std::span<const int> tokens);
  // Forgets positions n..pos()-1, as if only the first n tokens had been fed: the cache drops
  // their entries (entries before n keep their active flags; what a controller evicted stays
  // evicted) and the next decode feeds position n. Hooks are not told: a controller or observer
  // that keeps per-position state of its own is the caller's to replace. Lets one prefill serve
  // several continuations of a prompt. Throws std::logic_error unless 0 <= n <= pos().
  void rewind(int n);
  // A copy of what prefill() left, for restore_prefill() to start more runs from the same prompt
  // without processing it again: every prompt entry's K and V (on the GPU, a second copy in device
  // memory) and the next-token logits. Call it while the cache holds every position fed, none
  // evicted or inactive (after a prefill() that no controller compressed); throws
  // std::logic_error otherwise. nullptr when memory for the copy cannot be had, on the GPU unless
  // three times its size is free (the caller prefills again instead).
  std::shared_ptr<const PrefillSnapshot> snapshot_prefill() const;
  // Puts this engine where the prefill that `snapshot` copied left it, then lets the controller
  // compress the cache as prefill() does; returns the next-token logits [vocab]. Observers are
  // told nothing: those that want the prompt watched that prefill. Throws std::logic_error for a
  // snapshot of another engine.
  std::span<const float> restore_prefill(const PrefillSnapshot& snapshot);

  int pos() const;                  // positions processed so far
  KvSlots& slots();
  std::size_t kv_bytes() const;     // K+V bytes held now, in the cache's type (kv_dtype on the CPU, the GPU's storage type)
  std::size_t peak_kv_bytes() const;
  const Model& model() const { return model_; }
  const EngineOptions& options() const { return options_; }

 private:
  struct State;
  void decode_token(DecodeTeam& team, int pos);  // the calling thread's part of decode()
  std::span<const float> extend_batched(std::span<const int> tokens);  // extend() on the CPU
  const Model& model_;
  EngineOptions options_;
  std::unique_ptr<State> state_;        // CPU
  std::unique_ptr<CudaBackend> cuda_;   // Device::Cuda
};

// Attaches an observer and a controller to an engine for one run and detaches both however the
// run ends (an observer may stop a run by throwing through the engine).
class EngineAttachment {
 public:
  EngineAttachment(Engine& engine, AttentionObserver* observer, CacheController* controller) : engine_(engine) {
    engine_.set_observer(observer);
    engine_.set_controller(controller);
  }
  ~EngineAttachment() {
    engine_.set_observer(nullptr);
    engine_.set_controller(nullptr);
  }
  EngineAttachment(const EngineAttachment&) = delete;
  EngineAttachment& operator=(const EngineAttachment&) = delete;

 private:
  Engine& engine_;
};

}  // namespace kvs
