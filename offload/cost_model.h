// The cost model: predicted times of one decode step, one speculative cycle and one prefill chunk
// for a placement, from bytes and FLOPs over a hardware profile's rates. Pure functions.
//
// One sweep over a set of blocks for b tokens (DESIGN.md, "Placement"):
//   h2d  = sum over stream + disk blocks of bytes / H2D(bytes)       (copy stream)
//   disk = sum over disk blocks of bytes / NVMe                      (io threads)
//   gpu  = sum over GPU-computed blocks of max(bytes / device_read, 2 * params * b / GEMM) + launch
//          + attention over KV held in VRAM (KV bytes / device_read + attention FLOPs / GEMM)
//   cpu  = sum over cpu blocks of b * bytes / cpu_gemv(type) + a PCIe round trip of the activations
//          (with RunShape::cpu_int8 and a measured int8 rate: bytes / cpu_gemv_q8(type, b))
//          + attention over KV held in host RAM (b * KV bytes / host_read)
//   time = max(h2d, disk, gpu + cpu)
// Copies and disk reads overlap compute (prefetched ahead on their own streams); CPU-computed
// blocks sit on the layer chain, so they add to GPU compute. The CPU cost is linear in b (strata's
// CPU kernels are row dots: a batch re-reads the weights from cache, pessimistic for large b).
// Prefill: cpu-tier blocks are copied to the GPU through the pinned staging ring instead (a chunk
// of hundreds of tokens is GEMM work), host-KV attention reads the KV once per 16 queries.
// Speculation (draft depth d, draft length k, acceptance a): a cycle drafts k tokens through layers
// [0, d) + head (b = 1 each) and verifies through layers [d, n) + head for b = k + 1 (the verify
// reuses the draft's hidden states and KV below d); it yields (1 - a^(k+1)) / (1 - a) tokens.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_api.h"
#include "offload/hardware_profile.h"
#include "offload/model_blocks.h"
#include "offload/placement.h"
#include "offload/shared_ring.h"

namespace strata::offload {


// Device scratch of the CUDA engine (runtime/cuda_allocate.cpp allocates exactly these, so the
// planner's VRAM accounting matches what the arena will be asked for): logits are produced
// kLogitRows rows at a time; prefill GEMMs dequantise weights into a kGemmTileBytes f16 tile;
// cuBLAS gets kCublasWorkspaceBytes (the last two are the kernels' own constants, cuda_api.h).
inline constexpr uint32_t kLogitRows = 32;
inline constexpr uint64_t kGemmTileBytes = kernels::cuda::kGemmTileBytes;
inline constexpr uint64_t kCublasScratchBytes = kernels::cuda::kCublasWorkspaceBytes;
// Layer-major prefill (runtime/forward_pass.h forward_group): at most this many chunks share one
// pass over the streamed blocks. Past 32 the copy is a small share of a group's time even on a fast
// GPU (one sweep of 4.6 GiB against 32 chunks of GEMMs), and the buffer grows linearly.
inline constexpr uint32_t kMaxPrefillGroup = 32;
// RunShape::prefill_group_reserve: let plan() choose the reserve (planner.h, "prefill group").
inline constexpr uint32_t kPrefillGroupAuto = 0xffffffffu;

// RunShape::spread_streamed's default: true unless STRATA_PLAN_SPREAD=0 (read once per process).
bool spread_streamed_default();

struct RunShape {
  uint64_t ctx = 4096;        // target context (KV is sized for this)
  uint64_t prompt = 0;        // prompt tokens (0: ctx - gen)
  uint64_t gen = 256;         // generated tokens
  KvDtype kv = KvDtype::f16;  // all layers' K (and V, unless kv_v says otherwise)
  std::optional<KvDtype> kv_v;  // V's format when it differs from K's
  uint32_t draft_depth = 0;   // 0: no speculation
  uint32_t draft_len = 4;     // k
  double acceptance = 0.6;    // assumed per-token acceptance of the draft
  uint32_t prefill_chunk = 512;
  // Blocks in flight ahead of compute; the ring has depth + 1 slots. 0: the planner's choice
  // (kPrefetchAuto, planner.h).
  uint32_t prefetch_depth = 0;
  // Chunks of a layer-major prefill group whose buffer a streamed placement reserves before its
  // weights (`--prefill-group N`: fewer resident weights, each streamed block copied once per N
  // chunks of a prompt); 0: the group only takes the VRAM the weights leave (Plan::prefill_group);
  // kPrefillGroupAuto: plan() picks the reserve that minimises the predicted job time.
  uint32_t prefill_group_reserve = 0;
  // Planner policy (planner.h, "Draft path"): false: the draft path is kept resident whenever that
  // is as fast as the best plan; true: whenever it fits at all, even where the cost model rates it
  // slower (for runs that distrust the assumed acceptance). Only the false policy is monotone in VRAM.
  bool require_draft_resident = false;
  // cpu-tier matmuls run the int8-activation kernels (kernels/cpu/gemv_q8.h): a block of b columns
  // costs bytes / cpu_gemv_q8(type, b) where the profile measured the type (else the f32-activation
  // rate, b times). Set where the engine computing the cpu tier uses them.
  bool cpu_int8 = false;
  // Speculative runs: the blocks after the draft path take VRAM in an order whose tail (what is left
  // to stream) is spread over the layers instead of being the deepest ones (solver.cpp says why).
  // False keeps layer order (tests). Default true; STRATA_PLAN_SPREAD=0 makes it false (read once
  // per process: same-run comparisons, `strata plan` and the run planning alike).
  bool spread_streamed = spread_streamed_default();
  // Where the ring has two slots (prefetch depth 1): one buffer sized for the largest pair of
  // neighbours in the streaming order, slot 1 top-aligned (offload/shared_ring.h), instead of two
  // slots of the largest block. Default: shared_ring_default() (on; STRATA_SHARED_RING=0 off).
  bool shared_ring = shared_ring_default();
  // Sequences a decode step computes together (`batch --batch N`, `serve --parallel N`: one column
  // each in every matmul): the decode objective is their aggregate rate. Why it matters: a cpu-tier
  // block computes every column on the CPU while a streamed one crosses PCIe once for all of them,
  // so a placement that is faster for one sequence can be slower for eight.
  uint32_t decode_rows = 1;

  bool speculative() const { return draft_depth > 0 && draft_len > 0; }
  uint64_t prompt_tokens() const { return prompt ? prompt : (ctx > gen ? ctx - gen : ctx / 2); }
  // Decode is costed at the middle of generation.
  uint64_t decode_pos() const { return std::min<uint64_t>(ctx, prompt_tokens() + gen / 2); }
  uint32_t max_draft() const { return speculative() ? draft_len : 0; }
  KvDtype kv_k() const { return kv; }
  KvDtype kv_v_dtype() const { return kv_v.value_or(kv); }
  // "q8", or "k q8 / v q4" when K and V differ (reports).
  std::string kv_name() const;
  // Extra slots a sliding-window KV ring holds beyond the window: a prefill chunk writes all its
  // keys before its first query attends (runtime/cuda_forward.cpp sizes rings window + ubatch),
  // and speculative writes must not overwrite what a rollback still needs.
  uint32_t ring_margin() const { return std::max(prefill_chunk, max_draft()); }
};

// Placement (offload/placement.h): in plans every vector has one entry per layer; KV entries of
// sliding layers are always gpu when the profile has a GPU (their ring is small), host otherwise.

// A decode step's copies and its CPU work overlap only in part: the copy engine runs a ring's depth
// ahead of compute, so it idles through CPU blocks once the slots are full, and compute waits for
// copies between them. Measured (27B-shaped Q3_K_M, --vram 12GiB, 27 cpu-tier attention blocks
// spread among 34 streamed ones, H100 host, host graphs; strata bench decode): 31.2 ms per step
// where max() said 20.8, i.e. 0.74 of the shorter side showed. One placement's figure, standing in
// until the cost model simulates the ring and the block order; without it `--cpu-blocks auto`
// trusted a perfect overlap and chose plans predicted 1.5x faster than they ran.
inline constexpr double kCpuOverlapLoss = 0.74;

struct SweepCost {
  double h2d_s = 0, disk_s = 0, gpu_s = 0, cpu_s = 0;
  // Host RAM read by the copy engine (every streamed byte leaves from host memory) and by the CPU's
  // own blocks together: with a cpu tier beside streaming, the two share one memory bus (a desktop's
  // dual-channel DDR4 reads ~40 GB/s: PCIe 4 copies at 25 plus a CPU block at 30 do not both fit).
  double host_s = 0;
  uint64_t h2d_bytes = 0, disk_bytes = 0, cpu_bytes = 0;
  double slowest_s() const;  // the slowest resource alone (copies, disk, the layer chain, host RAM)
  // The step: the slowest resource, plus the share of the CPU's work copies fail to hide
  // (kCpuOverlapLoss).
  double total_s() const;
  std::string bottleneck(const HardwareProfile& p) const;  // "PCIe: 4.1 GB per step at 25 GB/s"
};

struct Prediction {
  SweepCost step;             // one plain decode step
  SweepCost draft, verify;    // one drafted token; one verify sweep of k + 1 tokens
  SweepCost prefill_chunk;    // one chunk at the middle of the prompt
  uint32_t prefill_group = 1; // chunks per layer-major group (1: chunk-major)
  double decode_tps = 0;      // plain
  double spec_tps = 0;        // with speculation (== decode_tps when off)
  double prefill_tps = 0;
  double ttft_s = 0;
  double objective_tps() const { return spec_tps; }
};

// The time of a b-column decode GEMV over a one-column one, as measured (cost_model.cpp says where):
// 1.14 at 2 columns, 1.39 at 8, 2.7 at 16. Prices a verify pass's rows and a batched step.
double gemv_column_cost(uint32_t b);

// Sweep over layers [l0, l1) (+ head) for `batch` tokens at KV position `pos`.
SweepCost sweep_cost(const ModelBlocks& m, const HardwareProfile& p, const Placement& pl, const RunShape& r,
                     uint32_t l0, uint32_t l1, bool head, uint32_t batch, uint64_t pos, bool prefill);
// prefill_group: chunks per layer-major group; streamed and disk bytes are counted once per
// group, compute once per chunk.
Prediction predict(const ModelBlocks& m, const HardwareProfile& p, const Placement& pl, const RunShape& r,
                   uint32_t prefill_group = 1);
// Whether the executor can run a placement's prefill layer-major: a block streams (stream or disk
// tier), and no cpu-tier block or host KV (runtime/cuda_allocate.cpp says why).
bool layer_major_prefill(const Placement& pl);
// Chunks in the prompt of r (the prefill chunk is the prompt when shorter).
uint64_t prefill_chunks(const RunShape& r);
// VRAM of a group of g chunks' residual streams (f32; 0 for g <= 1: the chunk scratch holds one).
uint64_t prefill_group_bytes(const ModelBlocks& m, const RunShape& r, uint32_t g);

// VRAM scratch: activations of one prefill chunk (flash-style attention, no score matrix), logits
// of k + 1 rows, and a fixed 64 MiB for GEMM workspaces.
uint64_t scratch_bytes(const ModelBlocks& m, const RunShape& r);

}  // namespace strata::offload
