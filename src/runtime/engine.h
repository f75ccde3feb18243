// An engine runs forward passes on one device: the interface the CLI, the batch runner and the
// speculative decoder use, whatever the backend. It holds ForwardOptions::n_seq sequences, each
// with its own KV cache; the single-sequence calls (eval, eval_layers, n_past(), truncate(n))
// work on sequence 0, and eval_batch() decodes one token of several sequences in one sweep over
// the weights (throughput mode: `strata batch --batch N`).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/trace.h"
#include "kv/sequence_table.h"
#include "offload/executor_plan.h"
#include "offload/placement.h"
#include "runtime/draft_window.h"
#include "runtime/model.h"
#include "runtime/token_tree.h"

namespace strata::runtime {

enum class Logits { none, last, all };

struct ForwardOptions {
  uint32_t n_ctx = 4096;  // KV positions
  uint32_t ubatch = 512;  // tokens per prefill chunk (also the sliding-window ring margin)
  // KV cache element types, chosen separately for K and V: F32, F16, Q8_0 or Q4_1 (quantised
  // types need head_dim % 32 == 0; see kv/kv_cache.h for the formats and their error bounds).
  GgmlType k_type = GgmlType::F32;
  GgmlType v_type = GgmlType::F32;
  // Where each weight block and layer's KV lives (CUDA only; offload/placement.h); default: all
  // in VRAM. use_plan() fills these five from a plan.
  offload::Placement placement;
  uint32_t ring_slots = 3;     // VRAM staging slots for streamed blocks: prefetch depth + 1 (>= 2)
  // Two slots in one two-ended buffer (offload/shared_ring.h), where that is smaller: the plan's
  // Plan::ring_shared.
  bool shared_ring = false;
  uint64_t vram_budget = 0;    // hard limit on what the engine allocates; 0 = none
  uint64_t pinned_budget = 0;  // limit on pinned host RAM (offload/pinned_pool.h); 0 = none
  // CUDA (STRATA_GPU_LAYOUT=0/1 overrides): repack the quantised matrices that live in VRAM or
  // pinned RAM into the GPU layout the faster GEMV reads (kernels/gpu_layout.h), once at load. The
  // layout has the GGUF size, so budgeted plans use it too. Its dp4a and int8 mma.sync kernels
  // give a column the same bits whatever the count (gemv_gpu.cuh), so verification and batched
  // rows run on MMA from 3 columns and still equal one-token steps bit for bit. Placements
  // with blocks copied raw at each use (disk tier) keep the GGUF layout throughout; cpu-tier
  // blocks keep it for themselves (cuda_allocate.cpp).
  bool gpu_layout = true;
  // Decode and verification rows (at most kMaxExactRows per matmul) on the CPU multiply with
  // int8-rounded activations (kernels/cpu/gemv_q8.h) for the types that have an int8 kernel; every
  // column is computed alike, so verification rows still equal one-token steps bit for bit. Prefill
  // chunks and other types keep the f32 kernels. The session's `--cpu-matmul auto` sets it for both
  // engines (the CUDA engine's cpu-tier blocks and head, HostCompute, round as its GPU does);
  // false (`--cpu-matmul exact`, and this default) is the exact f32-activation reference.
  bool cpu_int8 = false;
  // When set, every eval adds spans to it (per weight block: compute on the CPU or GPU, streamed
  // copies; per eval: the host's view). The CUDA engine then runs without CUDA graphs, so that
  // every block of the decode step is visible.
  std::shared_ptr<Trace> trace;
  // Sequences (sessions) the engine holds, each with its own KV cache of n_ctx positions,
  // allocated up front (n_seq times the KV memory; the CUDA engine counts it against its budget).
  uint32_t n_seq = 1;
  // Layer-major prefill (forward_pass.h, forward_group; FlexGen's order): an eval() of more than
  // one chunk runs in groups of this many tokens (rounded down to a multiple of ubatch; 0 or less
  // than two chunks: chunk-major), each weight block acquired once per group and run for the
  // group's chunks in turn. Bit-identical to chunk-major. Logits::all evals stay chunk-major (every
  // row's logits would need the head per chunk, for no gain). The CPU engine runs it as given (a
  // reference for the CUDA engine's); the CUDA engine only where its placement streams a block and
  // has no cpu-tier block or host KV (cuda_allocate.cpp says why), with a (group, n_embd) f32
  // residual buffer in VRAM. use_plan() sets it from the plan (Plan::prefill_group).
  uint32_t prefill_group_tokens = 0;
};

// Tokens per layer-major group for an eval of n tokens (ForwardOptions::prefill_group_tokens), or
// 0: chunk-major.
inline uint32_t prefill_group(const ForwardOptions& o, size_t n, Logits which) {
  const uint32_t g = o.ubatch ? o.prefill_group_tokens / o.ubatch * o.ubatch : 0;
  return g >= 2 * o.ubatch && n > o.ubatch && which != Logits::all ? g : 0;
}

enum class Device { cpu, cuda, automatic };

// Rows eval_layers() computes at once: the CUDA engine's multi-column GEMV limit, so that every
// row goes through the same kernels as a one-token decode step (kernels::cuda::kMaxGemvCols).
inline constexpr uint32_t kMaxExactRows = 16;

// Rows one forward pass may carry: a prefill chunk (ubatch) or a batched step (eval_batch: up to
// kMaxExactRows rows of n_seq sequences, at most ubatch per sequence). Scratch is sized for it.
inline uint32_t max_chunk_rows(const ForwardOptions& o) {
  return uint32_t(std::max<uint64_t>(o.ubatch, std::min<uint64_t>(kMaxExactRows, uint64_t(o.n_seq) * o.ubatch)));
}

// A slice of the forward pass, for self-speculative decoding: an early-exit draft runs layers
// [0, d) and the head; verification continues the drafted positions from layer d with the
// draft's residual stream, so layers < d are never computed twice. A layer-subset draft runs
// every layer but those `skip` marks: the residual stream passes a skipped layer unchanged, and
// the layer's KV is not written. A draft with a `window` attends, on full-attention layers, to
// the window's sinks and recent positions only (draft_window.h).
struct LayerRange {
  uint32_t first = 0;  // first layer run; > 0: the residual stream comes from hidden_in, not the embedding
  uint32_t end = 0;    // one past the last layer run; 0: every layer
  const float* hidden_in = nullptr;  // (n, n_embd) host memory: the residual stream entering `first`
  float* hidden_out = nullptr;       // (n, n_embd) host memory, optional: the stream leaving end - 1
  // Empty, or one entry per model layer: nonzero skips that layer. An all-zero mask is no mask.
  std::span<const uint8_t> skip = {};
  // Off, or the draft attention window of full-attention layers (recent >= kMaxExactRows). A
  // window that cuts no key of the call (DraftWindow::cuts) is no window.
  DraftWindow window = {};
  // Run the layers' low-bit shadow matrices (Engine::make_shadow) instead of the model's: a shadow
  // draft (SubSpec). Its KV and residual stream are the shadow's, so, as with a skip mask, n_past
  // does not move and the positions it drafted must be verified from layer 0.
  bool shadow = false;
};

// One row of a batched step: the next token of sequence `seq`. Its position is n_past(seq), plus
// the number of earlier rows of the same call that belong to the same sequence.
struct BatchRow {
  uint32_t seq = 0;
  int32_t token = 0;
};

class Engine {
 public:
  virtual ~Engine() = default;
  // Runs `tokens` at positions [n_past(), n_past() + size), appending to the KV cache. logits
  // receives n_vocab floats for the last token (Logits::last) or every token (Logits::all).
  // Errors (token id out of range, context full, device failure) leave n_past() unchanged.
  Status eval(std::span<const int32_t> tokens, Logits which, std::vector<float>& logits) {
    return eval(0, tokens, which, logits);
  }
  // The same on sequence `seq` (prefill of one session in throughput mode). seq < n_seq().
  virtual Status eval(uint32_t seq, std::span<const int32_t> tokens, Logits which, std::vector<float>& logits) = 0;
  // Runs tokens at positions [pos0, pos0 + n) through layers [r.first, r.end), writing those
  // layers' KV, then (which != none) the final norm and head on the stream after layer end - 1.
  // Every row is computed exactly as a one-token eval() computes it (same kernels, same reduction
  // order), so a batched verification is bit-identical to decoding one token at a time; hence
  // n <= kMaxExactRows. n_past() becomes pos0 + n when the range ends at the last layer, skips
  // none and has no window, and is unchanged otherwise (a draft writes ahead of n_past; verification completes the
  // positions from layer 0, or from the draft's layer d; truncate() rolls back the rejected ones
  // in every layer). A skipped layer writes no KV, so positions drafted with a skip mask must be
  // verified from layer 0. Likewise a draft window: its layers write KV computed from windowed
  // attention (and their residual stream is not the model's), so positions drafted with a window
  // must be verified from layer 0 -- never continued from the draft's hidden_out -- and a windowed
  // range never moves n_past(), even over every layer. The caller guarantees that the KV of
  // the layers in range is written for the positions below pos0 that attention reads.
  // Errors: bad range, skip mask, window or token, pos0 + n beyond n_ctx() or more than ubatch past
  // n_past() (the sliding-window ring would overwrite entries still needed), a window the engine
  // cannot run (supports_draft_window), device failure.
  virtual Status eval_layers(std::span<const int32_t> tokens, uint32_t pos0, const LayerRange& r, Logits which,
                             std::vector<float>& logits) = 0;
  // ---- token trees (M12: one verify pass over a drafted tree; runtime/token_tree.h) ----
  // Runs nodes of a token tree of sequence 0 through layers [r.first, r.end) as eval_layers()
  // does (every row computed as a one-token eval computes it; hidden_in / hidden_out and the
  // logits rows are the nodes run, in order). parents: the whole tree, 1 .. min(kMaxExactRows,
  // ubatch) nodes, parents[i] < i or -1 (a child of the committed context). tokens: the tree's LAST
  // tokens.size() nodes, the ones this call runs; the earlier nodes were run by earlier calls over
  // the same layers (a drafter grows a tree level by level; verification passes the whole tree).
  // Node i sits at position pos0 + depth(i) (RoPE, sliding window), writes its KV to slot pos0 + i
  // and attends to the committed keys < pos0 plus its ancestors and itself; pos0 must be n_past().
  // A chain (parents[i] = i - 1) gives eval_layers()'s logits bit for bit, with or without a draft
  // window (a node sees the committed keys a token at its position sees through the window, and
  // all its ancestors: the window's recent >= kMaxExactRows covers a tree's depth). A tree drafted
  // with a window is verified from layer 0 (as a chain). n_past() does not move:
  // keep_tree_path() commits a path. Errors: eval_layers' (range, tokens, context), a bad parent
  // array, too many nodes, more tokens than nodes, pos0 != n_past(), a skip mask, an engine without
  // trees (supports_trees()).
  virtual Status eval_tree(std::span<const int32_t> tokens, std::span<const int32_t> parents, uint32_t pos0,
                           const LayerRange& r, Logits which, std::vector<float>& logits);
  // Keeps one root-to-node path of the last eval_tree()'s tree (pos0 its pos0): path[j] is the
  // node at depth j, each the parent of the next. In every layer the KV of slot pos0 + path[j]
  // moves to slot pos0 + j (whole rows, whatever the KV type; sliding rings included), the other
  // branches are dropped, and n_past() becomes pos0 + path.size(). The caller guarantees that the
  // path's nodes were run through every layer. Errors (nothing changes): no tree evaluated at pos0,
  // a path that is not a chain of ancestors from a root, an engine without trees.
  virtual Status keep_tree_path(uint32_t pos0, std::span<const uint32_t> path);
  // ---- low-bit shadow weights (M12: drafting with every layer, SubSpec-style) ----
  // Requantises every layer's matrices to `type` from their exact decode and keeps the copies
  // beside the model's, for eval_layers calls with LayerRange::shadow (norms, the embedding and
  // the head stay the model's). Calling it again with the same type does nothing; another type
  // replaces the copies. Errors: a type strata cannot quantise to, an engine without shadows.
  virtual Status make_shadow(GgmlType type);
  // The shadow's type; empty where make_shadow has not run.
  virtual std::optional<GgmlType> shadow_type() const { return std::nullopt; }
  // Bytes the shadow copies take (0 without).
  virtual uint64_t shadow_bytes() const { return 0; }

  // Whether eval_tree / keep_tree_path work here (the CPU engine; the CUDA engine with
  // flash-decoding KV and no host compute, CudaForward::supports_trees). Where not, the
  // speculative decoder verifies chains.
  virtual bool supports_trees() const { return false; }
  // Whether eval_layers / eval_tree take a LayerRange::window (the CPU engine; the CUDA engine
  // where every full-attention layer's attention is flash-decoding or on the host). Where not,
  // the speculative decoder drafts over the whole context.
  virtual bool supports_draft_window() const { return false; }

  // Sequence 0's length: the single-sequence API.
  uint32_t n_past() const { return n_past(0); }
  // Forgets positions >= n of sequence 0 (speculative rollback, or restarting with n = 0).
  void truncate(uint32_t n) { truncate(0, n); }

  // ---- several sequences (ForwardOptions::n_seq) ----
  virtual uint32_t n_seq() const = 0;
  virtual uint32_t n_past(uint32_t seq) const = 0;
  // Forgets positions >= n of one sequence; the others are untouched. seq < n_seq() (asserted).
  virtual void truncate(uint32_t seq, uint32_t n) = 0;
  // Runs every row in one pass over the weights (each weight matrix is read once for all rows);
  // each row's KV write and attention use its own sequence. logits receives n_vocab floats per row,
  // in row order. Every row is computed exactly as a one-token eval() of that sequence alone
  // computes it (the kernels of eval_layers()), so results are bit-identical to decoding the
  // sequences one after another; hence rows.size() <= kMaxExactRows. Each sequence's n_past grows
  // by its number of rows. Errors (no rows, too many, a sequence or token out of range, a
  // sequence's context full or more than ubatch rows for one sequence, device failure) leave every
  // n_past unchanged.
  virtual Status eval_batch(std::span<const BatchRow> rows, std::vector<float>& logits) = 0;
  // Bytes of one sequence's KV cache (what each extra sequence costs).
  virtual uint64_t kv_bytes_per_seq() const = 0;
  virtual uint32_t n_ctx() const = 0;
  // Tokens per chunk, and how far eval_layers may write ahead of n_past() (ForwardOptions::ubatch).
  virtual uint32_t ubatch() const = 0;
  virtual const Model& model() const = 0;
  virtual std::string_view device_name() const = 0;
  // Device memory this engine allocated at its peak (0 for the CPU engine).
  virtual uint64_t vram_peak_bytes() const { return 0; }
  // Weight bytes copied host -> device by streaming so far (0 when everything is resident).
  virtual uint64_t streamed_bytes() const { return 0; }
  // Per layer, 1 where a weight block of the layer is not in VRAM (streamed, read from disk or
  // computed on the CPU: the placement's tiers), else 0; empty where every layer is resident or
  // the engine has no placement (the CPU engine). A drafter that skips these layers moves no
  // weight bytes (spec/subset_chooser.h).
  virtual std::vector<uint8_t> non_resident_layers() const { return {}; }
  // Of those, the bytes read from the model file by the disk tier.
  virtual uint64_t disk_bytes() const { return 0; }
  // Host seconds spent computing cpu-tier blocks and host-KV attention so far (0 without them).
  virtual double host_compute_seconds() const { return 0; }
  // CUDA graphs captured so far (0 where none are). A call that captured one paid a one-time cost
  // on top of its run: timings that fit a cost model skip such calls (spec/speculative_decoder.h).
  virtual uint64_t graph_captures() const { return 0; }
  // runtime::argmax (sampler.h) of the logits the last call wrote, where that call was an eval()
  // with Logits::last and the engine took the maximum while computing them (the CPU engine: the
  // head's thread-team parts each keep the maximum of their rows; the CUDA engine: a kernel in the
  // step, its answer copied back with the logits), so no serial pass over the vocabulary follows;
  // else -1. For a caller that takes the argmax of those logits unmodified.
  virtual int32_t last_argmax() const { return -1; }
};

// For engine implementations: the sequence table (kv/sequence_table.h) of o.n_seq sequences of
// the model's layers, n_ctx positions, ubatch the write-ahead margin.
kv::SequenceTable sequence_table(const model::ModelSpec& spec, const ForwardOptions& o);

// For engine implementations: token ids in the vocabulary (the error names the first bad index).
Status check_tokens(const model::ModelSpec& spec, std::span<const int32_t> tokens);

// For engine implementations: checks eval_layers' arguments (the errors listed there; the KV ones
// are sequence 0's, from the table; a shadow range where has_shadow is false); returns the range
// with `end` resolved (0 -> n_layer), an all-zero skip mask cleared, and a window that cuts no key
// of the call cleared.
Result<LayerRange> check_layer_range(const model::ModelSpec& spec, std::span<const int32_t> tokens, uint32_t pos0,
                                     const LayerRange& r, const kv::SequenceTable& seqs, bool has_shadow = false);
// Whether a checked range's pass completes its positions in every layer with the model's own
// weights, so that n_past moves (eval_layers' rule).
inline bool completes_positions(const LayerRange& checked, uint32_t n_layer) {
  return checked.end == n_layer && checked.skip.empty() && !checked.shadow && !checked.window.on();
}

// For engine implementations: checks eval_tree's arguments (the errors listed there) and returns
// the tree's shape; `range` receives the layer range with `end` resolved.
Result<TreeShape> check_tree(const model::ModelSpec& spec, std::span<const int32_t> tokens,
                             std::span<const int32_t> parents, uint32_t pos0, const LayerRange& r,
                             const kv::SequenceTable& seqs, LayerRange& range);

// For engine implementations: checks eval_batch's arguments (the errors listed there) and returns
// each row's position (SequenceTable::place_rows); row_seqs receives each row's sequence.
Result<std::vector<int32_t>> check_batch_rows(const model::ModelSpec& spec, std::span<const BatchRow> rows,
                                              const kv::SequenceTable& seqs, std::vector<uint32_t>& row_seqs);

// KV cache bytes of one sequence: K and V rows of every layer, n_ctx slots for full-attention
// layers and a ring of min(n_ctx, window + ubatch) for sliding ones (how both engines size it).
uint64_t kv_bytes_per_seq(const model::ModelSpec& spec, uint32_t n_ctx, uint32_t ubatch, GgmlType k_type,
                          GgmlType v_type);

// Sets the placement, ring slots and budgets of `o` to what the plan says the engine runs.
void use_plan(const offload::ExecutorPlan& e, ForwardOptions& o);

// automatic: CUDA when built with it and a device is present, else CPU.
Result<std::unique_ptr<Engine>> make_engine(std::shared_ptr<const Model> model, ForwardOptions options, Device device);

}  // namespace strata::runtime
