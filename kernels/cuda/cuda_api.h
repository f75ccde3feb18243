// The CUDA backend, callable from plain C++ (no CUDA headers here: the engine above kernels/
// compiles without them). Every function returns a Status carrying the CUDA error string and the
// operation's name; kernels are launched asynchronously on the given stream and their launch
// errors are checked right after the launch. Without CUDA (STRATA_HAVE_CUDA unset) the same
// functions exist and return "built without CUDA" (cuda_api_none.cpp), so callers need no #ifdefs.
//
// Memory contract: every pointer argument named d_* is device memory; weights use WeightView with
// a device `data` pointer, in the GGUF layout (ggml blocks, row-major, as on the host) or, for
// q3_K q4_K q5_K q6_K q8_0, the repacked GPU layout (layout == kGpu, kernels/gpu_layout.h; gemv,
// gemm, matmul, dequantize_rows and get_rows take both). Kernels own no memory: scratch comes from
// the caller (Workspace).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/status.h"
#include "kernels/weight_view.h"

namespace strata::kernels::cuda {

using Stream = void*;  // a cudaStream_t; nullptr = the default stream

// ---- memory and streams (device_memory.cu) -----------------------------------------------------
Result<void*> device_alloc(size_t bytes);
void device_free(void* d_ptr);
Status copy_to_device(void* d_dst, const void* src, size_t bytes, Stream s);
Status copy_to_host(void* dst, const void* d_src, size_t bytes, Stream s);
Status copy_on_device(void* d_dst, const void* d_src, size_t bytes, Stream s);
// A copy done by a kernel, not a copy engine: src may be pinned host memory seen through its
// device pointer (mapped_device_pointer), read over PCIe by the SMs. For the few KiB a step hands
// back from host work: on a copy engine they would queue behind the weight store's copies of
// streamed blocks (tens of MiB each, same direction) and stall the step for a whole block copy.
Status copy_by_kernel(void* d_dst, const void* src, size_t bytes, Stream s);
// The device's address of pinned host memory from pinned_alloc (unified addressing: mapped).
Result<void*> mapped_device_pointer(void* pinned);
Status memset_device(void* d_dst, int value, size_t bytes, Stream s);
Status synchronize(Stream s);
// fn(arg) runs on a CUDA-owned host thread once the work enqueued on s before it has completed;
// the work enqueued after it waits for it to return (cudaLaunchHostFunc: also inside a graph
// capture, as a host node). fn must not call the CUDA API; arg must outlive every run (a graph
// replays the same arg).
Status launch_host_func(Stream s, void (*fn)(void*), void* arg);
Result<Stream> stream_create();
void stream_destroy(Stream s);

// Page-locked ("pinned") host memory: what the copy engines read at full PCIe rate and what
// asynchronous copies need to stay asynchronous.
Result<void*> pinned_alloc(size_t bytes);
void pinned_free(void* p);

// Events order work across streams without blocking the host (timing disabled: cheapest kind).
using Event = void*;
Result<Event> event_create();
void event_destroy(Event e);
Status event_record(Event e, Stream s);
Status stream_wait(Stream s, Event e);  // work enqueued on s after this waits for e's last record
// Inside a stream capture: records e as an external event node of the graph, so that work enqueued
// outside the graph after its launch can wait (stream_wait) for the part of the graph before it.
Status event_record_external(Event e, Stream s);
// Timing events (traces): the GPU time between two recorded events, once both have completed.
Result<Event> event_create_timed();
Result<float> event_elapsed_ms(Event from, Event to);
Status event_synchronize(Event e);  // blocks the host until e's last record has completed
Result<bool> event_done(Event e);   // whether e's last record has completed (does not block)

// CUDA graphs: the work enqueued on s between capture_begin and capture_end becomes one
// executable graph, relaunched with a single call (the decode step: ~15 kernels per layer whose
// launch overhead would otherwise bound small models).
using Graph = void*;
Status capture_begin(Stream s);
Result<Graph> capture_end(Stream s);  // instantiated; error if anything in the capture failed
Status graph_launch(Graph g, Stream s);
void graph_destroy(Graph g);

struct MemInfo {
  uint64_t free_bytes = 0, total_bytes = 0;
};
Result<MemInfo> mem_info();  // of the current device

// cuBLAS's own scratch for the calling thread's handle, so that every device byte comes from the
// caller (the executor's arena) instead of cuBLAS allocating on first use.
Status set_matmul_workspace(void* d_ptr, size_t bytes);
inline constexpr size_t kCublasWorkspaceBytes = size_t(32) << 20;  // what cuBLAS asks for on Hopper
// The prefill GEMM dequantises weights into f16 tiles of about this size (a multiple of 64 rows).
inline constexpr size_t kGemmTileBytes = size_t(64) << 20;

// ---- fault injection (device_memory.cu) ---------------------------------------------------------
// Test hook: the nth checked CUDA call from now (1 = the next; copies, syncs, events, kernel
// launches, graph launches) fails as if the device had reported an error, with a message saying it
// was injected; 0 disarms. The environment variable STRATA_INJECT_CUDA_ERROR=n arms it once at the
// first checked call, so the CLI can be driven into a mid-step device failure. Calls that are not
// checked (frees, destroys) never count.
void inject_error(uint64_t nth_call);

// Caller-owned device scratch for kernels that need it (dequantised GEMM tiles, split-K partials).
struct Workspace {
  void* d_ptr = nullptr;
  size_t bytes = 0;
};

// ---- matmul on quantised weights (matmul.cu, gemv_*.cu) ----------------------------------------
// y (n_cols, n_out) = W x for x (n_cols, n_in), f32 activations, f32 accumulation.
// gemv: 1 <= n_cols <= kMaxGemvCols (decode, speculative verify); reads each weight byte once for
// all columns. Every type in GgmlType with CPU kernels is supported.
inline constexpr int kMaxGemvCols = 16;
// Weights in the GPU layout (below) take up to 64 columns (M12's token trees verify 64 tokens).
inline constexpr int kMaxGpuGemvCols = 64;
inline int max_gemv_cols(const WeightView& w) {
  return w.layout == WeightLayout::kGpu ? kMaxGpuGemvCols : kMaxGemvCols;
}
// Quantised types: with a workspace of workspace_bytes_for_gemv() the activations are rounded to
// int8 per 32 elements first and the products run on __dp4a (gemv_q8.cuh: ~4x fewer instructions,
// the error of 8-bit activations, as llama.cpp's CUDA backend); without one (or for float types, or
// weights not aligned for the wide loads) the float-activation kernel runs (exact weights x f32).
Status gemv(const WeightView& w, const float* d_x, int n_cols, float* d_y, Stream s);
Status gemv(const WeightView& w, const float* d_x, int n_cols, float* d_y, Workspace ws, Stream s,
            bool reuse_act = false);
size_t workspace_bytes_for_gemv(const WeightView& w, int n_cols);
// Matrices that read the same input (Q, K, V; gate, up) can share its int8 rounding: the key is
// nonzero when gemv/matmul(w, x, n_cols, y, ws) rounds x into ws, and two such calls with the same
// x, n_in, n_cols and key leave the same activations there, so the second may pass reuse_act =
// true when nothing else has written ws in between (then it only launches the GEMV).
int gemv_act_key(const WeightView& w, int n_cols, Workspace ws);
// Weights in the GPU layout (w.layout == kGpu, kernels/gpu_layout.h: q3_K q4_K q5_K q6_K q8_0)
// need the workspace (int8 activations, lane-ordered); few columns run on __dp4a, more on int8
// tensor cores (mma.sync). Both kernels compute every column with the same integer sums and the
// same float operations in the same order (gemv_gpu.cuh), so a column's output is bit for bit the
// same whatever the count and whichever kernel runs it. Bench/test hook: the column count from
// which the MMA kernel runs (default kGemvMmaFromCols; 1 = MMA for every count, 65 = dp4a up to
// its 16). Process-wide, not for concurrent use with different settings.
inline constexpr int kGemvMmaFromCols = 3;
void set_gemv_mma_min_cols(int n_cols);
// Launch the GPU-layout GEMV with programmatic dependent launch, so that it starts, and asks L2 for
// its first weight tiles, while the activation quantiser before it still runs (inside CUDA graphs
// too). Takes effect on compute capability 9.0 and later only (set_gemv_pdl(true) is a no-op on
// the current device otherwise); the CUDA engine turns it on. Process-wide, like
// set_gemv_mma_min_cols.
void set_gemv_pdl(bool on);
// Many columns (prefill): dequantise W tile by tile to f16 in the workspace and multiply on tensor
// cores with cuBLAS (f32 accumulation). workspace_bytes_for_gemm says how much scratch it needs.
size_t workspace_bytes_for_gemm(const WeightView& w, int n_cols);
// reuse_x16: ws already holds the f16 copy of this x (a gemm call with the same x, n_in and n_cols
// came last and nothing has written ws since: Q, K, V or gate, up of a prefill chunk).
Status gemm(const WeightView& w, const float* d_x, int n_cols, float* d_y, Workspace ws, Stream s,
            bool reuse_x16 = false);
// Picks gemv (int8 activations when ws allows) for n_cols <= kMaxGemvCols, else gemm; reuse_act is
// the chosen path's reuse (gemv's reuse_act, gemm's reuse_x16), keyed by matmul_act_key.
Status matmul(const WeightView& w, const float* d_x, int n_cols, float* d_y, Workspace ws, Stream s,
              bool reuse_act = false);
// gemv_act_key for gemv-sized calls; kGemmActKey when gemm would convert x to f16 into ws (the
// same x, n_in and n_cols leave the same f16 copy there); 0 when nothing reusable is left in ws.
inline constexpr int kGemmActKey = -1;
int matmul_act_key(const WeightView& w, int n_cols, Workspace ws);
// Decodes n_rows rows starting at row0 of W into f32 (tests, embedding gathers).
Status dequantize_rows(const WeightView& w, int64_t row0, int64_t n_rows, float* d_out, Stream s);
// Whether the CUDA backend has GEMV, GEMM and dequantise kernels for weights of type t (the
// float, legacy and K types; not yet the i-quants, which only the CPU computes). False without CUDA.
bool supports_weight_type(GgmlType t);

// ---- element-wise and per-vector ops (ops.cu) --------------------------------------------------
// Same semantics as kernels/cpu/ops.h (the reference).
Status rms_norm(const float* d_x, const float* d_w, int64_t n_vec, int64_t n, float eps, float* d_out, Stream s);
// RoPE on (n_tok, n_heads, head_dim) in place; position of token t is d_pos[t] / linear_scale.
Status rope(float* d_x, const int32_t* d_pos, int64_t n_tok, int64_t n_heads, int64_t head_dim, float base,
            float linear_scale, const float* d_freq_div, bool neox, Stream s);
Status silu_mul(float* d_gate, const float* d_up, int64_t n, Stream s);
Status gelu_tanh_mul(float* d_gate, const float* d_up, int64_t n, Stream s);
Status add(float* d_x, const float* d_y, int64_t n, Stream s);
// d_x += rms_norm(d_h) * d_w for each of n_vec vectors: a post-norm and the residual add in one
// kernel, with exactly the roundings of rms_norm into a buffer followed by add. d_h != d_x.
Status rms_norm_add(const float* d_h, const float* d_w, int64_t n_vec, int64_t n, float eps, float* d_x, Stream s);
// QK-norm then RoPE of every head of Q (n_tok, n_head, head_dim) and K (n_tok, n_head_kv,
// head_dim), in place, in one launch (qk_norm_rope.cu): each head vector is RMS-normalised with
// q_norm / k_norm (null: no norm) as rms_norm does, then rotated as rope() does at d_pos[t] /
// linear_scale. head_dim even, <= 512.
struct QkRopeDev {
  int64_t n_head = 0, n_head_kv = 0, head_dim = 0;
  const float* q_norm = nullptr;
  const float* k_norm = nullptr;
  float eps = 0, base = 0, linear_scale = 1;
  const float* freq_div = nullptr;
  bool neox = false;
  // (n_tok, head_dim / 2) pairs (cos, sin) that rope_angles wrote for the same positions and
  // configuration, or null: the kernel computes them (the same bits either way).
  const float* angles = nullptr;
};
Status qk_norm_rope(float* d_q, float* d_k, const int32_t* d_pos, int64_t n_tok, const QkRopeDev& p, Stream s);
// The angle table qk_norm_rope reads through QkRopeDev::angles: (cos, sin) of every pair of every
// row, d_table (n_tok, head_dim / 2) float pairs; p.angles is ignored. One launch per step and RoPE
// configuration instead of double pow and sincos in every layer's launch.
Status rope_angles(const int32_t* d_pos, int64_t n_tok, const QkRopeDev& p, float* d_table, Stream s);
// The greedy argmax of x[0, n) (n < 2^32) as a key in *d_key (device, 8 bytes, 8-aligned; set to
// 0 first, on s): argmax_from_key(key) is runtime::argmax's answer for the same values (the first
// index of the largest value, NaNs passed over, 0 where none is above -inf).
Status argmax_key(const float* d_x, int64_t n, unsigned long long* d_key, Stream s);
inline int32_t argmax_from_key(unsigned long long key) {
  return key == 0 ? 0 : int32_t(0xffffffffu - uint32_t(key & 0xffffffffu));
}
// Embedding rows for token ids (dequantised, times scale) into (n_tok, n_embd).
Status get_rows(const WeightView& table, const int32_t* d_ids, int64_t n_tok, float scale, float* d_out, Stream s);

// ---- attention (attention.cu) -------------------------------------------------------------------
// KV store layout as kernels/cpu/attention.h: `capacity` slots, position p in slot p % capacity,
// each slot one row of n_head_kv * head_dim values: f32, f16, or whole ggml blocks of 32 (Q8_0,
// Q4_1; needs head_dim % 32 == 0). K and V types are independent. Causal; window > 0 limits to
// the last window (and the first `sinks` positions, AttentionShapeDev::sinks). Quantised KV is decoded tile by tile inside the attention kernel (never a
// dequantised copy of the store); kv_write quantises once, when the token is written.
struct KvStoreDev {
  void* d_k = nullptr;  // written by kv_write, read by attention; 16-byte aligned
  void* d_v = nullptr;
  GgmlType k_dtype = GgmlType::F16;  // F32, F16, Q8_0 or Q4_1
  GgmlType v_dtype = GgmlType::F16;
  int64_t capacity = 0;
};
struct AttentionShapeDev {
  int64_t n_head = 0, n_head_kv = 0, head_dim = 0, window = 0;
  float scale = 1.0f;
  // With window > 0: keys [0, sinks) stay visible too (kernels/cpu/attention.h; a drafter's
  // window over a full-attention layer). Flash-decoding only: other kernels refuse sinks.
  int64_t sinks = 0;
};
// q, out: (n_q, n_head, head_dim); d_pos: n_q positions. Split over the sequence for long contexts
// (scratch in ws; attention_workspace_bytes says how much).
// 1..64 queries over f16 / q8_0 / q4_1 KV run flash-decoding (attention_decode.h): a row of a
// k-query call is bit-identical to the query run alone. `kernel` forces the tiled SIMT kernel
// (the decode path before flash-decoding), for benchmarks and tests only.
enum class AttentionKernel { best, tiled };
// True when attention() over these n_q queries computes each row bit-identically to that query
// run alone (flash-decoding applies and ws holds its splits): a verify pass may then run its
// queries in one call and still equal decode steps.
bool attention_rows_exact(const float* d_q, int64_t n_q, const KvStoreDev& kv, const AttentionShapeDev& s, Workspace ws);
// ws (16-byte aligned, or flash-decoding runs unsplit): partial results from its start, and
// flash-decoding's split counters in its last kAttentionCounterBytes (from a 16-byte boundary).
// The counters are state kept between calls: zero them once before a workspace's first call
// (attention_workspace_clear, or cudaMemset the whole workspace at allocation); every call leaves
// them zero. Nothing else may write them, and calls sharing a workspace must be on one stream.
// attention_workspace_bytes counts them.
inline constexpr size_t kAttentionCounterBytes = 64 * 1024;
size_t attention_workspace_bytes(int64_t n_q, const AttentionShapeDev& s, int64_t max_keys);
Status attention_workspace_clear(Workspace ws, Stream s);  // zeroes its counters (on s)
Status attention(const float* d_q, const int32_t* d_pos, int64_t n_q, const KvStoreDev& kv,
                 const AttentionShapeDev& s, float* d_out, Workspace ws, Stream s_,
                 AttentionKernel kernel = AttentionKernel::best);
// Writes (n_tok, n_head_kv * head_dim) K and V rows into their slots, converting to each store's
// dtype (quantised types: the codes of kernels/cpu's KV quantiser, kv/kv_quant.h, bit for bit).
Status kv_write(const float* d_k, const float* d_v, const int32_t* d_pos, int64_t n_tok, int64_t width,
                const KvStoreDev& kv, Stream s);

}  // namespace strata::kernels::cuda
