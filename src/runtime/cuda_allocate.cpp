// CudaForward::allocate: the engine's device layout at create() (weights resident or in streamed
// blocks, KV stores, activations, scratch), inside the VRAM arena's budget.
#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "core/units.h"
#include "kv/kv_quant.h"
#include "offload/cost_model.h"
#include "runtime/cuda_engine_state.h"
#include "runtime/cuda_step_graphs.h"
#include "kernels/gpu_layout.h"
#include "offload/weight_loader.h"

namespace strata::runtime {
namespace {

// Tokens per layer-major prefill group this engine runs (0: chunk-major), where the planner counts
// one (offload::layer_major_prefill): only where the placement streams a block (stream or disk
// tier), since with everything resident a group saves no copy; not with cpu-tier blocks or host
// KV, whose host-side state (HostCompute's staging of activations and per-chunk host KV writes)
// follows one chunk at a time. STRATA_PREFILL_GROUP=0 forces chunk-major (same-run comparisons).
uint32_t layer_major_group(const ForwardOptions& o) {
  if (!offload::layer_major_prefill(o.placement)) return 0;
  const char* env = std::getenv("STRATA_PREFILL_GROUP");
  if (env && std::string(env) == "0") return 0;
  return prefill_group(o, SIZE_MAX, Logits::last);
}

// Side streams for Ops::matmuls (cuda_engine_state.h "Side"): two, when every block is resident;
// otherwise none, and groups run in order. They read the main stream's rounding of the input, so
// they need no scratch of their own.
// Measured on the H200 (27B Q3_K_M): resident decode 117.3 -> 122.2 tok/s; at --vram 12GiB with
// streamed blocks the early:d=16 verify pass went 50.2 -> 53.1 ms and the draft step 4.0 -> 4.3 ms
// (one run each, when each side stream still rounded the input itself), so streamed engines keep
// the one stream. STRATA_SIDE_STREAMS=0 turns them off, =1 on for streamed engines too.
void allocate_side_streams(CudaForward::Impl& im) {
  const char* env = std::getenv("STRATA_SIDE_STREAMS");
  const std::string e = env ? env : "";
  if (e == "0" || im.timeline || (im.store && e != "1")) return;  // a trace wants its kernels in order
  constexpr int kSides = 2;
  auto fork = cuda::event_create();
  if (!fork) return;
  im.fork = *fork;
  for (int j = 0; j < kSides; ++j) {
    auto st = cuda::stream_create();
    auto ev = cuda::event_create();
    if (!st || !ev) {
      if (st) cuda::stream_destroy(*st);
      if (ev) cuda::event_destroy(*ev);
      break;
    }
    im.side.push_back({*st, *ev});
  }
}

}  // namespace

Status CudaForward::allocate() {
  Impl& im = *impl_;
  const offload::Placement& pl = opt_.placement;
  if (const char* env = std::getenv("STRATA_FUSED_ROUNDING"); env && std::string(env) == "0") im.fused_rounding = false;
  im.arena = std::make_unique<offload::VramArena>(opt_.vram_budget);
  im.pinned = std::make_unique<offload::PinnedPool>(opt_.pinned_budget);
  auto stream = cuda::stream_create();
  if (!stream) return stream.status();
  im.stream = *stream;
  if (opt_.trace) {
    auto t = offload::GpuTimeline::create(*opt_.trace, im.stream);
    if (!t) return t.status();
    im.timeline = std::move(t.value());
    const char* ops = std::getenv("STRATA_TRACE_OPS");
    im.trace_ops = ops && std::string(ops) == "1";
  }
  im.graph_policy = graph_policy_from_env();
  im.tree_graphs = tree_graphs_from_env();
  im.host_graphs = host_graphs_from_env();
  im.graphs_enabled = im.graph_policy != GraphPolicy::off;
  const auto& s = model_->spec;
  const auto& host = model_->weights;
  const uint32_t n_layer = s.hp.n_layer;
  STRATA_TRY(pl.check(n_layer));
  // Fail at create, naming the tensor, rather than at the first matmul.
  if (const auto* t = unsupported_tensor(*model_))
    return Status::error("tensor {} is {}: the CUDA engine has no kernels for that type yet (the CPU engine has: "
                         "--device cpu)", t->name, ggml_type_info(t->type).name);
  using offload::Tier;

  // Streamed blocks: their tensors are collected here and packed by the weight store; the device
  // views are patched with the slot address at each acquire.
  std::vector<offload::StreamedBlockSpec> specs;
  std::vector<std::vector<std::pair<kernels::WeightView*, size_t>>> members;  // view, tensor index
  // cpu-tier blocks are store blocks too (host-sourced, no pinned copy): a prefill chunk runs them
  // on the GPU through the ring (the cost model's assumption: a chunk of hundreds of tokens is GEMM
  // work); decode steps and verification rows compute them on the CPU.
  auto store_block = [&](Block b, uint32_t il) -> int32_t {
    const Tier t = pl.tier(b, il);
    if (t == Tier::gpu) return -1;
    specs.push_back({block_label(b, il), {}, 0, t == Tier::disk, t == Tier::cpu});
    members.emplace_back();
    return int32_t(specs.size() - 1);
  };
  im.attention_block.assign(n_layer, -1);
  im.ffn_block.assign(n_layer, -1);
  im.attention_cpu.assign(n_layer, false);
  im.ffn_cpu.assign(n_layer, false);
  for (uint32_t il = 0; il < n_layer; ++il) {
    im.attention_cpu[il] = pl.tier(Block::attention, il) == Tier::cpu;
    im.ffn_cpu[il] = pl.tier(Block::ffn, il) == Tier::cpu;
    im.attention_block[il] = store_block(Block::attention, il);
    im.ffn_block[il] = store_block(Block::ffn, il);
  }
  im.head_cpu = pl.head == Tier::cpu;
  im.head_block = store_block(Block::head, 0);
  const bool tied = s.hp.tied_output;
  // The embedding table is on the GPU only when it is resident anyway (as the tied head) or when
  // every block is resident (the resident engine); otherwise rows are gathered on the host (the
  // planner never places the embedding, model_blocks.h).
  im.host_embed = tied ? pl.head != Tier::gpu : pl.any_streamed() || pl.any(Tier::cpu);
  if (pl.any_kv_host() && opt_.n_seq > 1)
    return Status::error("host-RAM KV (--kv-host) serves one sequence; {} sessions need their KV in VRAM "
                         "(use --batch 1 or --kv-host none)", opt_.n_seq);
  if (pl.any(Tier::cpu) || pl.any_kv_host()) {
    // cpu-tier matmuls see at most kMaxExactRows rows (begin_chunk sends larger chunks to the GPU).
    std::vector<bool> kv_host(n_layer);
    for (uint32_t il = 0; il < n_layer; ++il) kv_host[il] = pl.kv_tier(il) == offload::KvTier::host;
    HostCompute::Options ho{opt_.n_ctx, opt_.ubatch, kMaxExactRows, opt_.k_type, opt_.v_type, kv_host, im.head_cpu,
                            opt_.cpu_int8, &model_->weights};
    auto h = HostCompute::create(s, ho);
    if (!h) return h.status();
    im.host = std::move(h.value());
    im.host->set_trace(opt_.trace.get());
  }

  Status err;
  auto upload = [&](const void* src, size_t bytes, const std::string& what) -> Result<void*> {
    auto d = im.alloc(bytes, what);
    if (!d) return d.status();
    STRATA_TRY(cuda::copy_to_device(*d, src, bytes, im.stream));
    return d;
  };
  // Weight matrices (nearly all the bytes) are read from the file by the loader at the end.
  std::vector<offload::LoadItem> loads;
  // `block` >= 0: the view goes into that streamed block instead of VRAM; a cpu-tier (host
  // sourced) block's view is also computed by im.host from the model's own view.
  // GPU layout (ForwardOptions::gpu_layout, STRATA_GPU_LAYOUT=1/0 overrides): every matrix of a
  // repacked type in VRAM or pinned RAM. Placements with disk blocks (copied raw at each use) keep
  // the GGUF layout throughout, so that every matrix runs the same kernel as in a resident GGUF
  // engine (streamed == resident bit for bit; a mixed engine would match neither). cpu-tier blocks
  // stay in the GGUF layout (the CPU reads them; a prefill chunk copies them raw and runs the
  // GEMM, whose f16 tiles are the same from either layout) while the rest is repacked: such an
  // engine matches the resident one to rounding anyway, its cpu-tier rows being the CPU's.
  // Under a VRAM budget only matrices whose layout is exactly their GGUF size (n_out a multiple of
  // 8: no padding rows) are repacked, so the planner's sizes stay exact.
  const char* layout_env = std::getenv("STRATA_GPU_LAYOUT");
  const bool want_layout = layout_env ? std::string(layout_env) == "1" : opt_.gpu_layout;
  im.gpu_layout = want_layout && !pl.any(Tier::disk);
  auto layout_bytes = [&](const kernels::WeightView& v) -> uint64_t {
    if (!im.gpu_layout) return 0;
    const uint64_t g = kernels::gpu_layout_bytes(v.type, v.n_in, v.n_out);
    return opt_.vram_budget == 0 || g == v.row_bytes * uint64_t(v.n_out) ? g : 0;
  };
  std::vector<std::vector<std::optional<kernels::WeightView>>> repack_src;  // per streamed block, per tensor
  if (im.gpu_layout) {
    // Exactness (ForwardOptions::gpu_layout): the dp4a and mma.sync kernels give every column the
    // same bits, so the column count from which the MMA kernel runs is a speed choice only
    // (default cuda::kGemvMmaFromCols; STRATA_GEMV_MMA_MIN_COLS overrides it for benchmarks).
    const char* mma = std::getenv("STRATA_GEMV_MMA_MIN_COLS");
    cuda::set_gemv_mma_min_cols(mma ? std::atoi(mma) : cuda::kGemvMmaFromCols);
    // The GEMV starts while the activation quantiser runs (cuda_api.h set_gemv_pdl; sm_90 and later,
    // a no-op before): resident 27B decode +2.5% on the H200 (4K context). STRATA_GEMV_PDL=0 turns it off.
    const char* pdl = std::getenv("STRATA_GEMV_PDL");
    cuda::set_gemv_pdl(!(pdl && std::string(pdl) == "0"));
  }
  auto matrix = [&](const kernels::WeightView& v, kernels::WeightView& out, int32_t block, const char* what) {
    out = v;
    if (v.empty() || !err.is_ok()) return;
    const bool from_host = block >= 0 && specs[block].from_host;
    if (from_host) im.host_view[&out] = &v;  // v lives as long as model_
    const uint64_t bytes = v.row_bytes * uint64_t(v.n_out);
    const uint64_t gpu_bytes = from_host ? 0 : layout_bytes(v);
    std::optional<kernels::WeightView> repack;
    if (gpu_bytes) {
      repack = v;
      out = kernels::gpu_layout_view(nullptr, v.type, v.n_in, v.n_out);
    }
    if (block >= 0) {
      const auto map = model_->file.bytes();
      const bool in_file = model_->file.is_mapped_file() && v.data >= map.data() && v.data + bytes <= map.data() + map.size();
      if (specs[block].on_disk && !in_file) {
        err = Status::error("block {} cannot be on the disk tier: {} is not stored in the model file as used",
                            specs[block].label, what);
        return;
      }
      const uint64_t file_offset = in_file ? uint64_t(v.data - map.data()) : 0;
      specs[block].tensors.push_back({v.data, gpu_bytes ? gpu_bytes : bytes, 0, file_offset});
      if (repack_src.size() < specs.size()) repack_src.resize(specs.size());
      repack_src[block].push_back(repack);
      members[block].emplace_back(&out, specs[block].tensors.size() - 1);
      out.data = nullptr;  // set at acquire
      return;
    }
    auto p = im.alloc(gpu_bytes ? gpu_bytes : bytes, std::string("weights ") + what);
    if (!p) { err = p.status(); return; }
    loads.push_back({v.data, bytes, *p, true, repack});
    out.data = static_cast<const uint8_t*>(*p);
  };
  auto vec = [&](const float* v, size_t n) -> const float* {
    if (!v || !err.is_ok()) return nullptr;
    auto p = upload(v, n * sizeof(float), "weights norm");
    if (!p) { err = p.status(); return nullptr; }
    return static_cast<const float*>(*p);
  };
  const uint32_t d = s.hp.n_embd, hd = s.hp.n_embd_head;
  if (tied) {
    matrix(host.token_embd, im.dev.output, im.head_block, "token_embd");  // the head
    im.dev.token_embd = im.host_embed ? host.token_embd : im.dev.output;
  } else {
    matrix(host.output, im.dev.output, im.head_block, "output");
    if (im.host_embed) im.dev.token_embd = host.token_embd;  // host pointer: gathered on the CPU
    else matrix(host.token_embd, im.dev.token_embd, -1, "token_embd");
  }
  im.dev.output_norm = vec(host.output_norm, d);
  im.dev.rope_freqs = vec(host.rope_freqs, hd / 2);
  im.dev.layers.resize(host.layers.size());
  // Per layer, by the architecture's role table: each matrix goes into its role's block (resident
  // when that block is), norms to VRAM; in the table's order (the packing order of a block).
  for (uint32_t il = 0; il < n_layer && err.is_ok(); ++il) {
    const auto& h = host.layers[il];
    auto& l = im.dev.layers[il];
    for (const model::LayerTensor& t : model::layer_tensors()) {
      const auto& info = model::role_info(t.role);
      if (t.norm) {
        l.*t.norm = vec(h.*t.norm, model::role_shape(t.role, s.hp)[0]);
        continue;
      }
      const int32_t block = info.block == Block::attention ? im.attention_block[il] : im.ffn_block[il];
      matrix(h.*t.matrix, l.*t.matrix, block, std::string(info.gguf_name).c_str());
    }
  }
  STRATA_TRY(err);

  // KV storage: the slots the sequence table gives each layer (a ring of window + ubatch for
  // sliding layers, n_ctx otherwise); each slot one row of K (V) in k_type (v_type): f32, f16 or
  // Q8_0/Q4_1 blocks (kv/kv_quant.h). One store per sequence (n_seq of them, all inside the
  // arena's budget); the kernels find position p in slot p % capacity, the table's rule.
  const size_t k_row = kv::kv_row_bytes(opt_.k_type, s.kv_width()), v_row = kv::kv_row_bytes(opt_.v_type, s.kv_width());
  im.kv.resize(opt_.n_seq);
  for (uint32_t sq = 0; sq < opt_.n_seq; ++sq) {
    const std::string tag = opt_.n_seq > 1 ? fmt::format("seq {} layer ", sq) : std::string();
    for (uint32_t il = 0; il < n_layer; ++il) {
      // Host-KV layers get no VRAM here (the plan counted their KV in host RAM).
      if (im.host && im.host->kv_on_host(il)) {
        im.kv[sq].push_back({});
        continue;
      }
      const int64_t cap = int64_t(seqs_.slots(il));
      auto k = im.alloc(size_t(cap) * k_row, "kv K " + tag + std::to_string(il));
      if (!k) return k.status();
      auto v = im.alloc(size_t(cap) * v_row, "kv V " + tag + std::to_string(il));
      if (!v) return v.status();
      im.kv[sq].push_back({{*k, *v, opt_.k_type, opt_.v_type, cap}});
    }
  }
  // Activations for one chunk (a prefill chunk or a batched step).
  const size_t n = max_chunk_rows(opt_);
  im.group_tokens = layer_major_group(opt_);
  auto fbuf = [&](size_t count) -> float* {
    if (!err.is_ok()) return nullptr;
    auto p = im.alloc(count * sizeof(float), "activations");
    if (!p) { err = p.status(); return nullptr; }
    return static_cast<float*>(*p);
  };
  im.buf = {fbuf(n * d), fbuf(n * d), fbuf(n * s.q_width()), fbuf(n * s.kv_width()), fbuf(n * s.kv_width()),
            fbuf(n * s.q_width()), fbuf(n * s.hp.n_ff), fbuf(n * s.hp.n_ff)};
  im.d_logits = fbuf(std::min<size_t>(n, offload::kLogitRows) * size_t(s.hp.n_vocab));
  STRATA_TRY(err);
  // Token ids and positions of a chunk, or of a whole layer-major group (copied once per group).
  const size_t n_ids = std::max<size_t>(n, im.group_tokens);
  auto ids = im.alloc(n_ids * sizeof(int32_t), "activations tokens");
  if (!ids) return ids.status();
  auto pos = im.alloc(n_ids * sizeof(int32_t), "activations positions");
  if (!pos) return pos.status();
  im.d_tokens = static_cast<int32_t*>(*ids);
  im.d_pos = static_cast<int32_t*>(*pos);
  auto tree = im.alloc(kMaxExactRows * (2 + kMaxExactRows) * sizeof(int32_t), "activations tree paths");
  if (!tree) return tree.status();
  im.d_tree_pos = static_cast<int32_t*>(*tree);
  im.d_tree_n = im.d_tree_pos + kMaxExactRows;
  im.d_tree_slots = im.d_tree_n + kMaxExactRows;
  // STRATA_ROPE_TABLES=0: every qk_norm_rope launch computes its angles (same bits; A/B timing).
  if (const char* env = std::getenv("STRATA_ROPE_TABLES"); !(env && std::string(env) == "0")) {
    auto angles = im.alloc(size_t(im.kRopeTables) * kMaxExactRows * im.kRopeTableHalf * 2 * sizeof(float),
                           "activations rope angles");
    if (!angles) return angles.status();
    im.d_rope_angles = static_cast<float*>(*angles);
  }
  im.host_pos.resize(n_ids);
  // Not fatal: without the staging, logits are copied into the caller's memory directly.
  const uint32_t staged_rows = uint32_t(std::min<size_t>({n, offload::kLogitRows, kMaxExactRows}));
  // The argmax key after the rows, 64-byte aligned.
  const size_t key_at = (size_t(staged_rows) * s.hp.n_vocab * sizeof(float) + 63) / 64 * 64;
  if (auto p = cuda::pinned_alloc(key_at + 64); p) {
    im.pinned_logits = static_cast<float*>(*p);
    im.pinned_logit_rows = staged_rows;
    im.pinned_key = reinterpret_cast<unsigned long long*>(static_cast<char*>(*p) + key_at);
  }
  auto key = im.alloc(64, "activations argmax");
  if (!key) return key.status();
  im.d_argmax_key = static_cast<unsigned long long*>(*key);
  // STRATA_GATED_GEMV=1: the fused gate/up GEMV (cuda_ops.h gated_matmuls). Off by default:
  // slower than the separate kernels in every form measured (gemv_gated.cu has the figures).
  if (const char* env = std::getenv("STRATA_GATED_GEMV"); env && std::string(env) == "1") {
    auto c = im.alloc(cuda::kGatedCounterBytes, "activations gated counters");
    if (!c) return c.status();
    STRATA_TRY(cuda::memset_device(*c, 0, cuda::kGatedCounterBytes, im.stream));
    im.d_gated_counters = static_cast<unsigned*>(*c);
  }
  if (im.host_embed) {
    auto p = cuda::pinned_alloc(n * d * sizeof(float));
    if (!p) return p.status();
    im.pinned_x = static_cast<float*>(*p);
  }
  // Scratch: the largest need of any matmul or attention call (views of streamed blocks carry
  // their shapes already, only the data pointer is missing).
  size_t ws = 0;
  const int gemv_cols = int(std::min<size_t>(n, cuda::kMaxGemvCols));
  for (const auto& l : im.dev.layers)
    for (const model::LayerTensor& t : model::layer_tensors()) {
      if (!t.matrix) continue;
      const kernels::WeightView& m = l.*t.matrix;
      ws = std::max({ws, cuda::workspace_bytes_for_gemm(m, int(n)), cuda::workspace_bytes_for_gemv(m, gemv_cols)});
    }
  ws = std::max({ws, cuda::workspace_bytes_for_gemm(im.dev.output, int(n)),
                 cuda::workspace_bytes_for_gemv(im.dev.output, gemv_cols)});
  const cuda::AttentionShapeDev shape{s.hp.n_head, s.hp.n_head_kv, hd, 0, s.attention_scale};
  // The attention's scratch starts past the rounding of its output for the output matrix
  // (Ops::attention: the attention kernel writes it where that matrix's GEMV reads it).
  if (im.fused_rounding) {
    for (const auto& l : im.dev.layers)
      im.att_round_bytes = std::max(im.att_round_bytes, cuda::workspace_bytes_for_gemv(l.wo, gemv_cols));
    im.att_round_bytes = (im.att_round_bytes + 255) / 256 * 256;
  }
  // The attention's counters (cuda_api.h kAttentionCounterBytes) end its scratch and stay out of
  // every other kernel's view: ws = [0, ws), counters = [ws, ws + counter bytes), zeroed here once.
  const size_t att = cuda::attention_workspace_bytes(int64_t(n), shape, opt_.n_ctx);
  const size_t counters = cuda::kAttentionCounterBytes;
  if (att >= counters) ws = std::max(ws, im.att_round_bytes + (att - counters));
  ws = (ws + 15) / 16 * 16;  // att_round_bytes too: the counters start where attention_partial_bytes puts them
  {
    auto p = im.alloc(ws + counters, "scratch kernels");
    if (!p) return p.status();
    im.ws = {*p, ws};
    im.att_ws_bytes = ws + counters - im.att_round_bytes;
    STRATA_TRY(cuda::memset_device(*p, 0, ws + counters, im.stream));
  }
  auto cws = im.alloc(cuda::kCublasWorkspaceBytes, "scratch cublas");
  if (!cws) return cws.status();
  im.d_cublas_ws = *cws;

  if (!specs.empty()) {
    const offload::DiskSource disk{model_->file.path(), {}};
    if (std::any_of(specs.begin(), specs.end(), [](const auto& b) { return b.on_disk; }) &&
        !model_->file.is_mapped_file())
      return Status::error("the disk tier needs a model file (this model was not loaded from one)");
    auto store =
        offload::WeightStore::create(*im.arena, *im.pinned, std::move(specs), opt_.ring_slots, im.stream, false,
                                     &disk, opt_.shared_ring);
    if (!store) return store.status();
    im.store = std::move(store.value());
    for (size_t b = 0; b < im.store->n_blocks(); ++b) {
      if (im.store->block(b).on_disk || im.store->block(b).from_host) continue;
      const auto& ts = im.store->block(b).tensors;
      for (size_t i = 0; i < ts.size(); ++i) {
        // Repacked tensors: the source is the GGUF matrix, the pinned slot gets the GPU layout.
        const auto& rp = b < repack_src.size() && i < repack_src[b].size() ? repack_src[b][i] : std::nullopt;
        const uint64_t src_bytes = rp ? rp->row_bytes * uint64_t(rp->n_out) : ts[i].bytes;
        loads.push_back({ts[i].host_src, src_bytes, im.store->pinned(b) + ts[i].offset, false, rp});
      }
    }
    im.store->set_timeline(im.timeline.get());
    im.patches.resize(im.store->n_blocks());
    for (size_t b = 0; b < members.size(); ++b)
      for (const auto& [view, t] : members[b]) im.patches[b].push_back({view, im.store->block(b).tensors[t].offset});
    log::info("streaming {} blocks ({} pinned) through {} VRAM slots ({}{})", im.store->n_blocks(),
              format_bytes(im.store->stats().pinned_bytes), opt_.ring_slots, format_bytes(im.store->stats().ring_bytes),
              im.store->stats().shared_ring ? ", one two-ended buffer" : "");
  }
  // Last, so that a plan whose scratch estimate fell short loses only the group (the planner gave
  // it the VRAM the placement left; cost_model.h prefill_group_bytes) and still runs chunk-major.
  if (im.group_tokens) {
    auto g = im.alloc(size_t(im.group_tokens) * d * sizeof(float), "activations prefill group");
    if (g) {
      im.group_x = static_cast<float*>(*g);
    } else {
      log::warn("layer-major prefill off (chunk by chunk instead): {}", g.message());
      im.group_tokens = 0;
    }
  }
  allocate_side_streams(im);
  auto loaded = offload::load_weights(model_->file, loads, *im.pinned, im.stream, opt_.trace.get());
  if (!loaded) return loaded.status();
  // Small loads (tests, the tiny model) take milliseconds whatever the rate: not worth a line.
  const std::string load_line =
      fmt::format("weights: {} in {:.2f} s ({:.2f} GB/s, {})", format_bytes(loaded->bytes), loaded->seconds,
                  loaded->seconds > 0 ? double(loaded->bytes) / loaded->seconds / 1e9 : 0.0, loaded->how);
  if (loaded->bytes >= (256ull << 20)) log::info("{}", load_line);
  else log::debug("{}", load_line);
  device_bytes_ = im.arena->peak();
  return cuda::synchronize(im.stream);
}

}  // namespace strata::runtime
