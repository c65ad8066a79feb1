// Host-side launchers of the CUDA kernels (kernels/*.cu), one section per op family; each is the
// device twin of the CPU op named in its section. Every pointer is device memory unless said
// otherwise; every launch is asynchronous on `stream` and reports nothing itself (callers check
// cudaGetLastError / the stream). fp32 accumulation and softmax throughout; the type T of weights
// and cache, __half (fp16), __nv_bfloat16 (bf16) or float, only stores (kernels/cuda_store.cuh).
// The templates are instantiated for those three types in the .cu files.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/group_rows.h"
#include "kernels/row_lists.h"
#include "kernels/softcap.h"

namespace kvs::cuda {

// ---- launch.cu
// Whether the decode kernels (embedding, products, RoPE and append, attention) may start while
// the kernel before them finishes (kernels/cuda_launch.cuh); on by default, used only on devices
// of compute capability 9.0 or later. Results are the same either way.
void set_launch_overlap(bool allowed);

// ---- convert.cu (twins: kvs::fp32_to_fp16 / fp32_to_bf16, the engine's embedding lookup)
// out[n] = T(x[n]), round to nearest even.
template <class T>
void to_store(T* out, const float* x, long n, cudaStream_t stream);
// x[n] as n_parts values of T whose sum carries x: part 0 = T(x), part p = T(x - the parts
// before it), at parts + p * part_stride. Two fp16 parts carry about 22 bits of x, three bf16
// parts 24, one float all of it; a GEMM of T weights by each part, summed in fp32, is then nearly a
// product by the fp32 x.
template <class T>
void split_store(T* parts, long part_stride, int n_parts, const float* x, long n, cudaStream_t stream);
// X[n, dim] = table[tokens[i], :] as fp32, times scale (Gemma's sqrt(dim)); tokens [n], table
// [vocab, dim].
template <class T>
void embed_rows(float* x, const T* table, const int32_t* tokens, int n, int dim,
                cudaStream_t stream, float scale = 1.0f);

// ---- matmul.cu (twins: ops::matvec, with ops::rmsnorm before and ops::add_bias /
// ops::swiglu after)
// The RMSNorm a decode product reads its input through: n(x) = x / sqrt(mean(x^2) + eps) * w.
// w null (the default): the product reads x as it is.
struct Norm {
  const float* w = nullptr;  // [cols]
  float eps = 0.0f;
};
// y[rows] = W[rows, cols] · n(x[cols]) + bias + beta * y, W of type T, x and the sums fp32 (one
// warp per row). The decode projections: W is read once, x at full precision. x (and norm.w)
// must be 16-byte aligned and must not overlap y (every warp reads all of x). bias [rows] or null.
template <class T>
void matvec(float* y, const T* w, const float* x, int rows, int cols, float beta, cudaStream_t stream,
            Norm norm = {}, const float* bias = nullptr);
// The FFN's gate/up product and its SwiGLU in one launch: h[rows] = silu(G · n(x)) * (U · n(x)),
// w_gate_up = [G; U] stacked, [2 rows, cols] (one warp reads a row of each); gelu: GeGLU instead,
// gelu_tanh(G · n(x)) * (U · n(x)) (Gemma).
template <class T>
void matvec_swiglu(float* h, const T* w_gate_up, const float* x, int rows, int cols, Norm norm,
                   cudaStream_t stream, bool gelu = false);

// ---- rmsnorm.cu (twin: ops::rmsnorm_rows, then an add for add_rmsnorm_rows)
// out[n, dim] = x / sqrt(mean(x^2) + eps) * w[dim]. One block per row. out may alias x.
void rmsnorm_rows(float* out, const float* x, const float* w, int n, int dim, float eps,
                  cudaStream_t stream);
// x[n, dim] += rmsnorm(y)[n, dim] with weight w[dim]: a block's output added to the residual
// through a norm after it (Gemma's post-attention and post-FFN norms). y must not overlap x.
void add_rmsnorm_rows(float* x, const float* y, const float* w, int n, int dim, float eps, cudaStream_t stream);

// ---- rope.cu (twin: ops::rope_apply)
// Row i of x starts at x + i * row_stride and holds n_heads heads of head_dim floats; every head
// of row i is rotated by the angles of position pos[i] (pos [n]), read from the tables
// cos/sin [n_pos, head_dim/2] (the CPU RopeTable's values, uploaded). interleaved: pairs
// (x[2j], x[2j+1]); otherwise rotate-half pairs (x[j], x[j + head_dim/2]).
void rope_rows(float* x, long row_stride, int n, int n_heads, int head_dim, const int32_t* pos,
               const float* cos, const float* sin, bool interleaved, cudaStream_t stream);

// ---- swiglu.cu (twins: ops::swiglu, ops::geglu_tanh)
// gate[n] = silu(gate) * up[n].
void swiglu(float* gate, const float* up, long n, cudaStream_t stream);
// gate[n] = gelu_tanh(gate) * up[n] (GeGLU, Gemma).
void geglu_tanh(float* gate, const float* up, long n, cudaStream_t stream);

// ---- softcap.cu (twin: ops::softcap)
// x[n] <- cap * tanh(x / cap) (Gemma 2's capped logits); nothing where cap is 0.
void softcap(float* x, long n, float cap, cudaStream_t stream);

// ---- bias.cu (twin: ops::add_bias)
// y[i, :] += b[dim] for every row of Y[n, dim].
void add_bias(float* y, const float* b, int n, int dim, cudaStream_t stream);

// ---- attention.cu (twins: ops::attend_rows for decode; the softmax inside ops::attend for
// prefill blocks)
//
// Decode: query head h (KV head g = h / (n_heads / n_kv_heads)) attends over the cache rows
// rows[g * rows_stride + j], j < n_rows[g], of its KV head: keys k + g * head_stride + row * head_dim
// (type T, [cap, head_dim] per KV head), values likewise in v. q [n_heads, head_dim] fp32.
// Writes probs[h * probs_stride + j] (softmax over the listed rows, in list order; probs null: no
// rows are written, and out and lse are the same bits), lse [n_heads] (log-sum-exp of the scores,
// score(q . k): scaled, soft-capped where score.softcap > 0) and out [n_heads, head_dim].
// max_rows >= every n_rows[g] (a host value that sizes the grid); n_rows[g] >= 1; head_dim a
// multiple of 8 up to 256; k and v 16-byte aligned, head_stride a multiple of 8.
// rope_cos/rope_sin (nullable, [n_pos, head_dim/2]): each key is first rotated by its slot (the
// pos-shift of EngineOptions::rope_in_cache), with the given pairing: slots[g * rows_stride + j]
// for listed row j (slots [n_kv_heads, rows_stride]), or its row index where slots is null.
// scratch: at least attend_decode_scratch_floats(n_heads, max_rows, head_dim) floats.
long attend_decode_scratch_floats(int n_heads, int max_rows, int head_dim);
template <class T>
void attend_decode(float* out, float* probs, long probs_stride, float* lse,
                   const float* q, const T* k, const T* v, long head_stride,
                   const int32_t* rows, long rows_stride, const int32_t* n_rows, int max_rows,
                   int n_heads, int n_kv_heads, int head_dim, ops::Scoring score, const float* rope_cos,
                   const float* rope_sin, const int32_t* slots, bool interleaved, float* scratch,
                   cudaStream_t stream);

// Prefill block: scores [n_heads, nq, ld] hold the scaled logits of query rows q0..q0+nq-1 over
// keys 0..n_keys-1 (n_keys = q0 + nq), soft-capped here by softcap (0: none). Each row becomes its
// causal softmax in place: keys past the row's own position get probability 0, and with window > 0
// (sliding-window attention) so do keys at or before q - window. lse [n_heads, nq] gets each row's
// log-sum-exp over the keys it kept. The probabilities of keys 0..n_keys-1 also go to parts
// ([n_parts, part_stride], indexed as scores) as split_store would write them, for the P·V GEMMs:
// one pass instead of a second kernel reading the block again (and its columns past n_keys).
template <class T>
void softmax_causal(float* scores, float* lse, T* parts, long part_stride, int n_parts, int n_heads, int nq,
                    int n_keys, long ld, int q0, int window, float softcap, cudaStream_t stream);

// The rows of a block over gathered keys (Engine::extend's chunk on the GPU): scores [n_heads, nq,
// ld] hold the scaled logits of query rows over keys 0..n_keys-1 (soft-capped here by softcap);
// row i (of every head) keeps keys begin[i]..end[i]-1 (device arrays [nq], begin < end <= n_keys)
// and becomes their softmax, zeros elsewhere; lse [n_heads, nq] and parts as above.
template <class T>
void softmax_ranges(float* scores, float* lse, T* parts, long part_stride, int n_parts, int n_heads, int nq,
                    int n_keys, long ld, const int32_t* begin, const int32_t* end, float softcap,
                    cudaStream_t stream);

// ---- capture.cu (twin: kernels/capture.h) — prefill reductions kept on the device
//
// colsum[h * col_stride + j] += sum over i < nq of probs[(h * nq + i) * ld + j], j < n_keys.
void colsum_add(float* colsum, long col_stride, const float* probs, int n_heads, int nq,
                int n_keys, long ld, cudaStream_t stream);
// The rows of a prefill block that fall in the last W prompt queries (P - W .. P - 1) are copied
// into window [n_heads, W, P]: block row i (query q0 + i) lands in window row q0 + i - (P - W),
// keys 0..n_keys-1, zeros for keys n_keys..P-1; window_lse [n_heads, W] gets lse [n_heads, nq].
void window_rows(float* window, float* window_lse, const float* probs, const float* lse,
                 int n_heads, int nq, int n_keys, long ld, int q0, int P, int W,
                 cudaStream_t stream);
// Block-pooled overview pooled [n_heads, nb, nb], nb = ceil(P / block): cell (a, b <= a) +=
// (mass of the block's rows in pool row a on the keys of pool column b) / min(block, P - a * block),
// so each pooled row ends as the mean of its queries' rows summed over key blocks (sums to 1).
void pool_add(float* pooled, const float* probs, int n_heads, int nq, int n_keys, long ld, int q0,
              int P, int block, cudaStream_t stream);

// ---- kv_cache.cu (twins: KvStore::append, ops::rope_apply, ops::rmsnorm_rows)
//
// Appends n rows per KV head: row t of KV head g goes to cache row r = rows[g * rows_stride + t]
// (k_cache + g * head_stride + r * head_dim), rounded to T, from k_src + t * src_stride +
// g * head_dim (likewise v). rows [n_kv_heads, rows_stride]; rows_stride 0 shares one list.
template <class T>
void kv_append(T* k_cache, T* v_cache, long head_stride, const float* k_src,
               const float* v_src, long src_stride, int n, int n_kv_heads, int head_dim,
               const int32_t* rows, long rows_stride, cudaStream_t stream);
// Qwen3's QK-norm: the RMSNorm weights [head_dim] of every query head (q) and key head (k), each
// null for none, and the norm's epsilon.
struct HeadNorms {
  const float* q = nullptr;
  const float* k = nullptr;
  float eps = 0.0f;
};
// Decode's RoPE and append in one launch. qkv [n_heads + 2 n_kv_heads, head_dim] holds the new
// token's q, k and v heads. With norms given, q's (k's) heads are first RMS-normalised in place
// (as ops::rmsnorm_rows over head_dim). With cos/sin given ([n_pos, head_dim/2]), q's and k's
// heads are rotated in place by the angles of position pos[0] (pos [1], as rope_rows); then KV
// head g's key and value go, rounded to T, to cache row slot0[g] (as kv_append with n = 1).
// cos/sin null: no rotation (keys cached before RoPE).
template <class T>
void rope_append(T* k_cache, T* v_cache, long head_stride, float* qkv, int n_heads, int n_kv_heads,
                 int head_dim, const int32_t* pos, const float* cos, const float* sin, bool interleaved,
                 const int32_t* slot0, cudaStream_t stream, HeadNorms norms = {});
// dst row i = src row idx[i] for i < n, rows of head_dim values. dst and src must not overlap.
template <class T>
void gather_rows(T* dst, const T* src, const int32_t* idx, int n, int head_dim,
                 cudaStream_t stream);

// ---- row_lists.cu (twin: ops::edit_row_list)
//
// For each KV head g: dst + g * stride = ops::edit_row_list of src + g * stride by edits[g]
// (offsets into payload), slots + g * stride likewise when slots is not null. max_entries bounds
// no head's work (its grid-stride loops cover any count); it sizes the grid. dst must not
// overlap src.
void edit_row_lists(int32_t* dst, int32_t* slots, const int32_t* src, long stride, const ops::RowListEdit* edits,
                    const int32_t* payload, int n_kv_heads, int max_entries, cudaStream_t stream);

// ---- key_ranking.cu (twins: ops::head_max_logit_keys, ops::top_k_keys)
//
// out[0 .. min(k, n)) = ops::top_k_keys of ops::head_max_logit_keys(rows, stride, lse, n_heads, n): the
// ranked indices, ascending. rows [n_heads, stride], lse [n_heads], scratch [n] uint32, out [min(k, n)].
// Nothing is written for k <= 0 or n <= 0. For k < n, scratch is left holding the head-max keys; for
// k >= n, out = 0 .. n-1 and rows, lse and scratch are not touched. The selection runs in one block of
// 1024 threads.
void rank_keys(int32_t* out, const float* rows, long stride, const float* lse, int n_heads, int n, int k,
               uint32_t* scratch, cudaStream_t stream);

// ---- group_rows.cu (twin: ops::reduce_group_rows, the same bits)
// out[g * out_stride + j], j < n_keys[g]: KV head g's group query-head rows (rows h = g * group ..
// g * group + group - 1, each over its first n_keys[g] entries) renormalized by ops::lane_sum and
// reduced over the group. n_keys [n_kv] on the device; max_keys >= every n_keys[g] (a host value
// that sizes the grid); sums: scratch of n_kv * group floats.
void reduce_group_rows(float* out, long out_stride, const float* rows, long stride, const int32_t* n_keys,
                       int n_kv, int group, int max_keys, ops::GroupReduce how, float* sums, cudaStream_t stream);

}  // namespace kvs::cuda
