// The CUDA engine's device state (CudaForward::Impl): arena, streams, weights with device views,
// streamed-block store, host tiers, KV stores, activations, scratch and the step graphs. Shared by
// the engine's files: cuda_forward.cpp (entry points), cuda_allocate.cpp (create-time layout),
// cuda_ops.h (the forward-pass policy), cuda_step_graphs.cpp (CUDA graphs of step shapes).
#pragma once

#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/log.h"
#include "kernels/cuda/cuda_api.h"
#include "offload/gpu_timeline.h"
#include "offload/pinned_pool.h"
#include "offload/vram_arena.h"
#include "offload/weight_store.h"
#include "runtime/cuda_forward.h"
#include "runtime/forward_pass.h"
#include "runtime/host_compute.h"
#include "runtime/step_graph_key.h"
#include "runtime/token_tree.h"

namespace strata::runtime {

namespace cuda = kernels::cuda;

// Which steps replay CUDA graphs (STRATA_CUDA_GRAPHS, read at create): off; resident_decode,
// single-sequence decode steps of a resident engine only (what graphs covered before streamed
// graph steps existed); all, the default: every step shape run_step_graph accepts (decode, drafts,
// verification, batched steps; resident or streamed; tests/gpu/test_step_graphs.cpp checks them
// bit for bit against eager steps).
enum class GraphPolicy { off, resident_decode, all };

struct CudaForward::Impl {
  cuda::Stream stream = nullptr;
  std::unique_ptr<offload::VramArena> arena;   // every device byte this engine holds
  // Pinned host memory under the --pinned budget: streamed blocks, bounce buffers, load staging.
  std::unique_ptr<offload::PinnedPool> pinned;
  std::unique_ptr<offload::WeightStore> store; // streamed blocks (null: all resident)
  model::ModelWeights dev;  // the model's weights, with device pointers (streamed: set per use)
  // Per streamed block: which device views point into its slot, at which packed offset.
  struct Patch { kernels::WeightView* view; uint64_t offset; };
  std::vector<std::vector<Patch>> patches;
  std::vector<int32_t> attention_block, ffn_block;  // per layer: block id in the store, or -1
  int32_t head_block = -1;
  // cpu-tier blocks and host KV (null: nothing runs on the host). The device views of a cpu
  // block's matrices have no data; host_view maps each to the model's host view the CPU reads.
  std::unique_ptr<HostCompute> host;
  std::unordered_map<const kernels::WeightView*, const kernels::WeightView*> host_view;
  std::vector<bool> attention_cpu, ffn_cpu;  // per layer: a cpu-tier block (its id is in *_block)
  bool head_cpu = false;
  bool cpu_blocks_on_gpu = false;  // this chunk runs the cpu-tier blocks on the GPU (prefill)
  bool is_cpu(Block b, uint32_t il) const {
    if (b == Block::head) return head_cpu;
    const auto& v = b == Block::attention ? attention_cpu : ffn_cpu;
    return il < v.size() && v[il];
  }
  // The store block acquired for (b, il) in this chunk, or -1 (resident, or computed on the CPU).
  int32_t acquired_block(Block b, uint32_t il) const {
    if (!store || (is_cpu(b, il) && !cpu_blocks_on_gpu)) return -1;
    return block_id(b, il);
  }
  bool gpu_layout = false;  // resident and pinned matrices repacked (ForwardOptions::gpu_layout)
  bool host_embed = false;  // token_embd stays in host memory: rows gathered on the CPU
  float* pinned_x = nullptr;  // host gather staging (ubatch x n_embd)
  struct LayerKv { cuda::KvStoreDev store; };
  std::vector<std::vector<LayerKv>> kv;  // [sequence][layer]
  ForwardBuffers buf{};
  // Layer-major prefill (ForwardOptions::prefill_group_tokens): a group's residual streams,
  // (group_tokens, n_embd); null (group_tokens 0): every prefill runs chunk-major.
  float* group_x = nullptr;
  uint32_t group_tokens = 0;
  int32_t* d_tokens = nullptr;
  int32_t* d_pos = nullptr;
  std::vector<int32_t> host_pos;  // positions of the current chunk (max_chunk_rows entries)
  float* d_logits = nullptr;
  // Pinned staging for logits rows on their way to the caller (logits_to_host), null where the
  // pinned allocation failed: up to kMaxExactRows rows (a decode, draft or verify step).
  float* pinned_logits = nullptr;
  uint32_t pinned_logit_rows = 0;
  // The greedy argmax of a decode step's logits, taken on the device (Ops::takes_argmax,
  // cuda_api.h argmax_key) and copied back with the logits into pinned_key (after the pinned
  // logits rows); logits_to_host decodes it into `argmax` (-1 for any other copy). Engine::last_argmax.
  unsigned long long* d_argmax_key = nullptr;
  unsigned long long* pinned_key = nullptr;
  int32_t argmax = -1;
  // The fused gate/up GEMV's per-block counters (act_round.h gated_gemv, kGatedCounterBytes, zero
  // between calls); null unless STRATA_GATED_GEMV=1 (cuda_allocate.cpp says why), and then gate,
  // up and the activation run as three ops (the same bits: an A/B switch).
  unsigned* d_gated_counters = nullptr;
  cuda::Workspace ws;
  void* d_cublas_ws = nullptr;
  // Ops::matmuls (cuda_ops.h): the 2nd and 3rd matrices of a group (K and V beside Q, up beside
  // gate) run on side streams, forked from and joined back to `stream` by events (inside graph
  // captures too), all reading the input's one int8 rounding in ws. Small matrices (a 27B's K and
  // V: 256 CTAs) leave most of the GPU idle alone. Empty (streamed blocks, STRATA_SIDE_STREAMS=0,
  // --trace): a group runs one matrix after the other.
  struct Side {
    cuda::Stream stream = nullptr;
    cuda::Event join = nullptr;
  };
  // Norms and gated activations round their output for the GEMV after them (act_round.h);
  // STRATA_FUSED_ROUNDING=0: the GEMV's own quantiser does it (the same bits, one more kernel).
  bool fused_rounding = true;
  // With fused rounding, ws's first att_round_bytes hold the attention output's rounding for the
  // output matrix and the attention's own scratch follows (Ops::att_ws): att_ws_bytes from there,
  // past the end of ws by the attention's split counters (cuda_api.h kAttentionCounterBytes), which
  // no other kernel may write: they are zeroed once at allocation and every attention call leaves
  // them zero. Only im.stream runs attention (side streams run matmuls on ws, never the counters).
  size_t att_round_bytes = 0;
  size_t att_ws_bytes = 0;
  std::vector<Side> side;
  cuda::Event fork = nullptr;
  // Steps of at most kMaxExactRows rows (decode, draft, verify, batched decode) as CUDA graphs, one
  // per StepShape (cuda_step_graphs.cpp), captured at a shape's first step. Inputs (tokens,
  // positions, the residual stream entering a layer range, gathered embedding rows) are copied
  // before each launch and outputs (logits, the residual stream) after it, outside the graph.
  // Streamed blocks are copied inside the graph (weight_store.h, "graph steps").
  std::map<StepShape, cuda::Graph> step_graphs;
  GraphPolicy graph_policy = GraphPolicy::all;
  bool graphs_enabled = true;   // off after a failed capture, or by the policy (off)
  bool capturing = false;
  bool capture_warm = false;
  // Token trees (CudaForward::eval_tree / keep_tree_path): the tree last evaluated, at tree_pos0,
  // until a path is kept or another step runs. Each node runs as the decode step of its path
  // (attention_tree.h TreePathDev). Per row t of the call (node node0 + t): d_tree_pos[t] its path
  // position (pos0 + depth: RoPE and the attention's query), d_tree_n[t] its path's length (depth
  // + 1), d_tree_slots[t * kMaxExactRows + k] its ancestor at depth k (then the node itself); copied
  // from host_tree before the step, so a step's graph depends on the row count, not the shape.
  std::optional<TreeShape> tree;
  uint32_t tree_pos0 = 0;
  bool tree_graphs = false;         // tree steps as graphs too (cuda_step_graphs.h tree_graphs_from_env)
  bool host_graphs = true;          // steps with host work as graphs too (host_graphs_from_env)
  // RoPE angle tables of a step (Ops::rope_dev): kRopeTables tables of kMaxExactRows rows of up to
  // kRopeTableHalf (cos, sin) pairs, one per RoPE configuration the step's layers use.
  static constexpr int kRopeTables = 4;
  static constexpr int64_t kRopeTableHalf = 256;  // qk_norm_rope's largest head_dim / 2
  float* d_rope_angles = nullptr;
  int32_t* d_tree_pos = nullptr;    // kMaxExactRows
  int32_t* d_tree_n = nullptr;      // kMaxExactRows
  int32_t* d_tree_slots = nullptr;  // kMaxExactRows x kMaxExactRows
  std::vector<int32_t> host_tree;   // all three, staged until the step's synchronize
  CudaForward::GraphStats graph_stats;    // the step being captured finds its first streamed blocks in the ring
  Status first_error;  // the first failed kernel of the current eval (ops cannot return one)
  std::unique_ptr<offload::GpuTimeline> timeline;  // --trace: GPU spans (null: not tracing)
  uint32_t block_mark = 0;                         // timeline mark at the current block's start
  bool trace_ops = false;                          // STRATA_TRACE_OPS=1: a span per kernel call too

  ~Impl() {
    for (auto& [shape, g] : step_graphs) cuda::graph_destroy(g);
    timeline.reset();
    store.reset();  // waits for the streams before the ring goes
    if (stream) (void)cuda::synchronize(stream);
    host.reset();  // after the sync: no upload still reads its staging
    if (pinned_x) cuda::pinned_free(pinned_x);
    if (pinned_logits) cuda::pinned_free(pinned_logits);
    pinned.reset();  // after the store and the sync: nothing reads its buffers
    arena.reset();
    for (Side& sd : side) {
      if (sd.stream) cuda::stream_destroy(sd.stream);
      if (sd.join) cuda::event_destroy(sd.join);
    }
    if (fork) cuda::event_destroy(fork);
    if (stream) cuda::stream_destroy(stream);
  }
  Result<void*> alloc(size_t bytes, const std::string& what) { return arena->alloc(bytes, what); }
  // `rows` logits rows from the device to the caller's (pageable) memory, waiting for them. Rows
  // that fit go through pinned_logits: a pinned copy at full PCIe speed plus a host copy take about
  // half the time of a copy into pageable memory (a 16-row verify moves 16 MiB at 262K vocabulary).
  // with_argmax: the step took its argmax key (Ops::takes_argmax), copied and decoded here too.
  void logits_to_host(float* dst, const float* src, size_t rows, size_t n_vocab, bool with_argmax) {
    const size_t bytes = rows * n_vocab * sizeof(float);
    argmax = -1;
    if (!pinned_logits || rows > pinned_logit_rows) return check(cuda::copy_to_host(dst, src, bytes, stream));
    check(cuda::copy_to_host(pinned_logits, src, bytes, stream));
    const bool key = with_argmax && pinned_key;
    if (key) check(cuda::copy_to_host(pinned_key, d_argmax_key, sizeof(*pinned_key), stream));
    check(cuda::synchronize(stream));
    if (!first_error.is_ok()) return;
    std::memcpy(dst, pinned_logits, bytes);
    if (key) argmax = cuda::argmax_from_key(*pinned_key);
  }
  // The weight block being computed (ops outside blocks: embedding, copies) and its tier, so that
  // a device failure names where it happened.
  std::optional<std::pair<Block, uint32_t>> current_block;
  void check(Status s) {
    if (s.is_ok() || !first_error.is_ok()) return;
    first_error = current_block ? s.with_context(fmt::format("block {} ({})", block_label(current_block->first,
                                                                                          current_block->second),
                                                             block_tier(current_block->first, current_block->second)))
                                : s;
  }
  const char* block_tier(Block b, uint32_t il) const {
    if (store && is_cpu(b, il))
      return cpu_blocks_on_gpu ? "cpu tier, run on the GPU for prefill" : "cpu tier, computed on the host";
    const int32_t id = store ? block_id(b, il) : -1;
    if (id < 0) return "resident";
    return store->block(uint32_t(id)).on_disk ? "streamed from disk" : "streamed from pinned RAM";
  }
  int32_t block_id(Block b, uint32_t il) const {
    return b == Block::head ? head_block : b == Block::attention ? attention_block[il] : ffn_block[il];
  }
};

}  // namespace strata::runtime
