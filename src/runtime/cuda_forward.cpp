#include "runtime/cuda_forward.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>

#include "core/half.h"
#include "core/log.h"
#include "core/units.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/quant_kernels.h"
#include "kernels/cuda/cuda_api.h"
#include "kv/kv_quant.h"
#include "offload/cost_model.h"
#include "offload/gpu_timeline.h"
#include "offload/vram_arena.h"
#include "offload/weight_store.h"
#include "runtime/forward_pass.h"
#include "runtime/host_compute.h"
#include "runtime/weight_loader.h"

namespace strata::runtime {

namespace cuda = kernels::cuda;

struct CudaForward::Impl {
  cuda::Stream stream = nullptr;
  std::unique_ptr<offload::VramArena> arena;   // every device byte this engine holds
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
  bool host_embed = false;  // token_embd stays in host memory: rows gathered on the CPU
  float* pinned_x = nullptr;  // host gather staging (ubatch x n_embd)
  struct LayerKv { cuda::KvStoreDev store; };
  std::vector<std::vector<LayerKv>> kv;  // [sequence][layer]
  ForwardBuffers buf{};
  int32_t* d_tokens = nullptr;
  int32_t* d_pos = nullptr;
  std::vector<int32_t> host_pos;  // positions of the current chunk (max_chunk_rows entries)
  float* d_logits = nullptr;
  cuda::Workspace ws;
  void* d_cublas_ws = nullptr;
  // The single-token decode step as a CUDA graph per sequence (resident engines only: a streamed
  // block's slot changes from step to step). Captured on a sequence's first decode step (its KV
  // stores are baked in); inputs (token, position) are copied before each launch and the logits
  // after it, outside the graph.
  std::vector<cuda::Graph> decode_graph;
  bool graphs_enabled = true;   // off after a failed capture, or by STRATA_CUDA_GRAPHS=0
  bool capturing = false;
  Status first_error;  // the first failed kernel of the current eval (ops cannot return one)
  std::unique_ptr<offload::GpuTimeline> timeline;  // --trace: GPU spans (null: not tracing)
  uint32_t block_mark = 0;                         // timeline mark at the current block's start
  bool trace_ops = false;                          // STRATA_TRACE_OPS=1: a span per kernel call too

  ~Impl() {
    for (auto g : decode_graph) cuda::graph_destroy(g);
    timeline.reset();
    store.reset();  // waits for the streams before the ring goes
    if (stream) (void)cuda::synchronize(stream);
    host.reset();  // after the sync: no upload still reads its staging
    if (pinned_x) cuda::pinned_free(pinned_x);
    arena.reset();
    if (stream) cuda::stream_destroy(stream);
  }
  Result<void*> alloc(size_t bytes, const std::string& what) { return arena->alloc(bytes, what); }
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

CudaForward::CudaForward(std::shared_ptr<const Model> model, ForwardOptions options)
    : model_(std::move(model)), opt_(options), n_past_(options.n_seq, 0), impl_(std::make_unique<Impl>()) {
  impl_->decode_graph.assign(options.n_seq, nullptr);
}

CudaForward::~CudaForward() = default;

Result<std::unique_ptr<CudaForward>> CudaForward::create(std::shared_ptr<const Model> model, ForwardOptions opt) {
  const auto& spec = model->spec;
  if (opt.n_ctx == 0 || opt.ubatch == 0) return Status::error("context and ubatch must be positive");
  if (opt.n_seq == 0) return Status::error("the number of sequences must be positive");
  if (opt.n_ctx > spec.hp.n_ctx_train && spec.hp.n_ctx_train > 0)
    return Status::error("context {} is longer than the model allows ({} tokens)", opt.n_ctx, spec.hp.n_ctx_train);
  if (Status st = kv::check_kv_type(opt.k_type, spec.hp.n_embd_head); !st) return Status::error("K: {}", st.message());
  if (Status st = kv::check_kv_type(opt.v_type, spec.hp.n_embd_head); !st) return Status::error("V: {}", st.message());
  if ((opt.k_type == GgmlType::F32) != (opt.v_type == GgmlType::F32))
    return Status::error("KV cache types k {} / v {}: on CUDA f32 KV needs both K and V f32 (f16, q8, q4 mix freely)",
                         kv::kv_type_name(opt.k_type), kv::kv_type_name(opt.v_type));
  std::unique_ptr<CudaForward> f(new CudaForward(std::move(model), opt));
  STRATA_TRY(f->allocate());
  return f;
}

Status CudaForward::allocate() {
  Impl& im = *impl_;
  const auto& res = opt_.residency;
  im.arena = std::make_unique<offload::VramArena>(res.vram_budget);
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
  const auto& s = model_->spec;
  const auto& host = model_->weights;
  const uint32_t n_layer = s.hp.n_layer;
  auto streamed = [](const std::vector<bool>& v, uint32_t il) { return il < v.size() && v[il]; };

  // Streamed blocks: their tensors are collected here and packed by the weight store; the device
  // views are patched with the slot address at each acquire.
  std::vector<offload::StreamedBlockSpec> specs;
  std::vector<std::vector<std::pair<kernels::WeightView*, size_t>>> members;  // view, tensor index
  auto new_block = [&](std::string label, bool on_disk, bool from_host) {
    specs.push_back({std::move(label), {}, 0, on_disk, from_host});
    members.emplace_back();
    return int32_t(specs.size() - 1);
  };
  for (uint32_t il = 0; il < n_layer; ++il)
    if ((streamed(res.attention_streamed, il) && streamed(res.attention_cpu, il)) ||
        (streamed(res.ffn_streamed, il) && streamed(res.ffn_cpu, il)))
      return Status::error("layer {}: a block is both streamed and on the cpu tier", il);
  if (res.head_streamed && res.head_cpu) return Status::error("the head is both streamed and on the cpu tier");
  // cpu-tier blocks are store blocks too (host-sourced, no pinned copy): a prefill chunk runs them
  // on the GPU through the ring (the cost model's assumption: a chunk of hundreds of tokens is GEMM
  // work); decode steps and verification rows compute them on the CPU.
  im.attention_block.assign(n_layer, -1);
  im.ffn_block.assign(n_layer, -1);
  im.attention_cpu.assign(n_layer, false);
  im.ffn_cpu.assign(n_layer, false);
  for (uint32_t il = 0; il < n_layer; ++il) {
    im.attention_cpu[il] = streamed(res.attention_cpu, il);
    im.ffn_cpu[il] = streamed(res.ffn_cpu, il);
    if (streamed(res.attention_streamed, il) || im.attention_cpu[il])
      im.attention_block[il] =
          new_block(block_label(Block::attention, il), streamed(res.attention_disk, il), im.attention_cpu[il]);
    if (streamed(res.ffn_streamed, il) || im.ffn_cpu[il])
      im.ffn_block[il] = new_block(block_label(Block::ffn, il), streamed(res.ffn_disk, il), im.ffn_cpu[il]);
  }
  im.head_cpu = res.head_cpu;
  if (res.head_streamed || res.head_cpu) im.head_block = new_block(block_label(Block::head, 0), res.head_disk, res.head_cpu);
  const bool tied = s.hp.tied_output;
  // The embedding table is on the GPU only when it is resident anyway (as the tied head) or when
  // every block is resident (the resident engine); otherwise rows are gathered on the host (the
  // planner never places the embedding, model_blocks.h).
  im.host_embed = tied ? res.head_streamed || res.head_cpu : res.any_streamed() || res.any_cpu();
  if (res.any_kv_host() && opt_.n_seq > 1)
    return Status::error("host-RAM KV (--kv-host) serves one sequence; {} sessions need their KV in VRAM "
                         "(use --batch 1 or --kv-host none)", opt_.n_seq);
  if (res.any_cpu() || res.any_kv_host()) {
    // cpu-tier matmuls see at most kMaxExactRows rows (begin_chunk sends larger chunks to the GPU).
    HostCompute::Options ho{opt_.n_ctx, opt_.ubatch, kMaxExactRows, opt_.k_type, opt_.v_type, res.kv_host, res.head_cpu};
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
  std::vector<LoadItem> loads;
  // `block` >= 0: the view goes into that streamed block instead of VRAM; a cpu-tier (host
  // sourced) block's view is also computed by im.host from the model's own view.
  auto matrix = [&](const kernels::WeightView& v, kernels::WeightView& out, int32_t block, const char* what) {
    out = v;
    if (v.empty() || !err.is_ok()) return;
    if (block >= 0 && specs[block].from_host) im.host_view[&out] = &v;  // v lives as long as model_
    const uint64_t bytes = v.row_bytes * uint64_t(v.n_out);
    if (block >= 0) {
      const auto map = model_->file.bytes();
      const bool in_file = model_->file.is_mapped_file() && v.data >= map.data() && v.data + bytes <= map.data() + map.size();
      if (specs[block].on_disk && !in_file) {
        err = Status::error("block {} cannot be on the disk tier: {} is not stored in the model file as used",
                            specs[block].label, what);
        return;
      }
      const uint64_t file_offset = in_file ? uint64_t(v.data - map.data()) : 0;
      specs[block].tensors.push_back({v.data, bytes, 0, file_offset});
      members[block].emplace_back(&out, specs[block].tensors.size() - 1);
      out.data = nullptr;  // set at acquire
      return;
    }
    auto p = im.alloc(bytes, std::string("weights ") + what);
    if (!p) { err = p.status(); return; }
    loads.push_back({v.data, bytes, *p, true});
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
  for (uint32_t il = 0; il < n_layer && err.is_ok(); ++il) {
    const auto& h = host.layers[il];
    auto& l = im.dev.layers[il];
    const int32_t ab = im.attention_block[il], fb = im.ffn_block[il];
    l.attn_norm = vec(h.attn_norm, d);
    matrix(h.wq, l.wq, ab, "wq"); matrix(h.wk, l.wk, ab, "wk"); matrix(h.wv, l.wv, ab, "wv"); matrix(h.wo, l.wo, ab, "wo");
    l.q_norm = vec(h.q_norm, hd); l.k_norm = vec(h.k_norm, hd);
    l.post_attn_norm = vec(h.post_attn_norm, d);
    l.ffn_norm = vec(h.ffn_norm, d);
    matrix(h.ffn_gate, l.ffn_gate, fb, "ffn_gate"); matrix(h.ffn_up, l.ffn_up, fb, "ffn_up");
    matrix(h.ffn_down, l.ffn_down, fb, "ffn_down");
    l.post_ffw_norm = vec(h.post_ffw_norm, d);
  }
  STRATA_TRY(err);

  // KV: a ring of window + ubatch slots for sliding layers, n_ctx slots otherwise; each slot one
  // row of K (V) in k_type (v_type): f32, f16 or Q8_0/Q4_1 blocks (kv/kv_quant.h).
  // One cache per sequence (n_seq of them, all inside the arena's budget).
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
      const uint32_t w = s.window(il);
      const int64_t cap = w ? std::min<int64_t>(opt_.n_ctx, int64_t(w) + opt_.ubatch) : opt_.n_ctx;
      auto k = im.alloc(size_t(cap) * k_row, "kv K " + tag + std::to_string(il));
      if (!k) return k.status();
      auto v = im.alloc(size_t(cap) * v_row, "kv V " + tag + std::to_string(il));
      if (!v) return v.status();
      im.kv[sq].push_back({{*k, *v, opt_.k_type, opt_.v_type, cap}});
    }
  }
  // Activations for one chunk (a prefill chunk or a batched step).
  const size_t n = max_chunk_rows(opt_);
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
  auto ids = im.alloc(n * sizeof(int32_t), "activations tokens");
  if (!ids) return ids.status();
  auto pos = im.alloc(n * sizeof(int32_t), "activations positions");
  if (!pos) return pos.status();
  im.d_tokens = static_cast<int32_t*>(*ids);
  im.d_pos = static_cast<int32_t*>(*pos);
  im.host_pos.resize(n);
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
    for (const auto* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.ffn_gate, &l.ffn_up, &l.ffn_down})
      ws = std::max({ws, cuda::workspace_bytes_for_gemm(*m, int(n)), cuda::workspace_bytes_for_gemv(*m, gemv_cols)});
  ws = std::max({ws, cuda::workspace_bytes_for_gemm(im.dev.output, int(n)),
                 cuda::workspace_bytes_for_gemv(im.dev.output, gemv_cols)});
  const cuda::AttentionShapeDev shape{s.hp.n_head, s.hp.n_head_kv, hd, 0, s.attention_scale};
  ws = std::max(ws, cuda::attention_workspace_bytes(int64_t(n), shape, opt_.n_ctx));
  if (ws) {
    auto p = im.alloc(ws, "scratch kernels");
    if (!p) return p.status();
    im.ws = {*p, ws};
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
        offload::WeightStore::create(*im.arena, std::move(specs), res.ring_slots, res.pinned_budget, im.stream, false,
                                     &disk);
    if (!store) return store.status();
    im.store = std::move(store.value());
    for (size_t b = 0; b < im.store->n_blocks(); ++b)
      if (!im.store->block(b).on_disk && !im.store->block(b).from_host)
        for (const auto& t : im.store->block(b).tensors)
          loads.push_back({t.host_src, t.bytes, im.store->pinned(b) + t.offset, false});
    im.store->set_timeline(im.timeline.get());
    im.patches.resize(im.store->n_blocks());
    for (size_t b = 0; b < members.size(); ++b)
      for (const auto& [view, t] : members[b]) im.patches[b].push_back({view, im.store->block(b).tensors[t].offset});
    log::info("streaming {} blocks ({} pinned) through {} VRAM slots ({})", im.store->n_blocks(),
              format_bytes(im.store->stats().pinned_bytes), res.ring_slots, format_bytes(im.store->stats().ring_bytes));
  }
  auto loaded = load_weights(model_->file, loads, im.stream, opt_.trace.get());
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

namespace {

struct Ops {
  CudaForward::Impl& im;
  const model::ModelSpec& spec;
  float* host_logits = nullptr;  // (rows, n_vocab) of the current chunk
  const LayerRange* range = nullptr;  // eval_layers: hidden in/out, attention one query at a time
  RowMap map;                         // the chunk's rows (begin_chunk)
  std::string block_name = {};        // the current block ("attn 3"): host compute spans in the trace

  // Before every device op: it may change the activations the host copied for a cpu-tier matmul.
  void device_op() {
    if (im.host) im.host->forget_input();
  }

  uint32_t logit_rows() const { return offload::kLogitRows; }
  float* logits(uint32_t) { return im.d_logits; }
  void copy_inputs(const int32_t* tokens, uint32_t n, const RowMap& m) {
    for (uint32_t t = 0; t < n; ++t) im.host_pos[t] = m.pos_of(t);
    im.check(cuda::copy_to_device(im.d_tokens, tokens, n * sizeof(int32_t), im.stream));
    im.check(cuda::copy_to_device(im.d_pos, im.host_pos.data(), n * sizeof(int32_t), im.stream));
  }
  void logits_done(uint32_t r0, uint32_t rows) {
    if (im.capturing) return;  // copied after the graph launch
    const size_t nv = spec.hp.n_vocab;
    im.check(cuda::copy_to_host(host_logits + r0 * nv, im.d_logits, rows * nv * sizeof(float), im.stream));
  }

  void begin_chunk(const int32_t* tokens, uint32_t n, const RowMap& m, Layers L, bool head) {
    map = m;
    // Host sources outlive the copies: the caller's tokens and im.host_pos stay untouched until
    // eval() synchronizes at the end of the chunk, so no wait (and no allocation) per token here.
    if (!im.capturing) copy_inputs(tokens, n, m);
    // cpu-tier blocks: on the GPU for a prefill chunk (n > kMaxExactRows, never a verification),
    // on the CPU otherwise, where a few rows cost less than moving the block over PCIe.
    im.cpu_blocks_on_gpu = range == nullptr && n > kMaxExactRows;
    if (im.store) {
      std::vector<uint32_t> order;
      auto add = [&](Block b, uint32_t il) {
        if (const int32_t id = im.acquired_block(b, il); id >= 0) order.push_back(uint32_t(id));
      };
      for (uint32_t il = L.first; il < L.end; ++il) {
        if (!L.runs(il)) continue;
        add(Block::attention, il);
        add(Block::ffn, il);
      }
      if (head) add(Block::head, 0);
      im.check(im.store->set_schedule(std::move(order)));
    }
  }
  void begin_block(Block b, uint32_t il) {
    im.current_block = std::pair{b, il};
    if (im.host) block_name = block_label(b, il);
    const int32_t id = im.acquired_block(b, il);
    if (id >= 0) {
      auto base = im.store->acquire(uint32_t(id));
      if (!base) return im.check(base.status());
      for (const auto& p : im.patches[id]) p.view->data = *base + p.offset;
    }
    // After acquire: a wait for a streamed block shows as a gap before its span.
    if (im.timeline) {
      auto m = im.timeline->mark(im.stream);
      if (!m) return im.check(m.status());
      im.block_mark = *m;
    }
  }
  void end_block(Block b, uint32_t il) {
    if (im.timeline) {
      auto m = im.timeline->mark(im.stream);
      if (!m) return im.check(m.status());
      im.timeline->span("gpu compute", block_label(b, il), im.block_mark, *m);
    }
    const int32_t id = im.acquired_block(b, il);
    if (id >= 0) im.check(im.store->release(uint32_t(id)));
    im.current_block.reset();
  }
  void embed(const int32_t* tokens, uint32_t n, float scale, float* x) {
    device_op();
    if (!im.host_embed) return im.check(cuda::get_rows(im.dev.token_embd, im.d_tokens, n, scale, x, im.stream));
    // Rows of the host-resident table, decoded on the CPU; only n x n_embd floats cross PCIe.
    const auto& t = im.dev.token_embd;
    const auto* k = kernels::cpu::quant_kernels(t.type);
    for (uint32_t i = 0; i < n; ++i) {
      float* row = im.pinned_x + int64_t(i) * t.n_in;
      k->dequantize(t.row(tokens[i]), row, t.n_in);
      if (scale != 1.0f) kernels::cpu::scale(row, scale, t.n_in);
    }
    im.check(cuda::copy_to_device(x, im.pinned_x, size_t(n) * t.n_in * sizeof(float), im.stream));
  }
  void load_hidden(float* x, uint32_t n) {
    device_op();
    im.check(cuda::copy_to_device(x, range->hidden_in, size_t(n) * spec.hp.n_embd * sizeof(float), im.stream));
  }
  void store_hidden(const float* x, uint32_t n) {
    im.check(cuda::copy_to_host(range->hidden_out, x, size_t(n) * spec.hp.n_embd * sizeof(float), im.stream));
  }
  // STRATA_TRACE_OPS=1 with --trace: one span per kernel call on the "gpu ops" track (where a
  // block's time goes; costs a pair of events per op).
  struct OpSpan {
    CudaForward::Impl& im;
    std::string name;
    uint32_t begin = 0;
    bool on = false;
    OpSpan(CudaForward::Impl& i, const std::function<std::string()>& label) : im(i) {
      if (!im.timeline || !im.trace_ops) return;
      auto m = im.timeline->mark(im.stream);
      if (!m) return;
      begin = *m;
      name = label();
      on = true;
    }
    ~OpSpan() {
      if (!on) return;
      auto m = im.timeline->mark(im.stream);
      if (m) im.timeline->span("gpu ops", std::move(name), begin, *m);
    }
  };
  void norm(const float* x, const float* w, int64_t n_vec, int64_t dim, float eps, float* out) {
    OpSpan op(im, [&] { return fmt::format("norm {}x{}", n_vec, dim); });
    device_op();
    im.check(cuda::rms_norm(x, w, n_vec, dim, eps, out, im.stream));
  }
  void matmul(const kernels::WeightView& w, const float* x, uint32_t n, float* y) {
    if (im.host && !im.cpu_blocks_on_gpu) {
      if (auto it = im.host_view.find(&w); it != im.host_view.end())
        return im.check(im.host->matmul(*it->second, x, n, y, im.stream, block_name));
    }
    device_op();
    OpSpan op(im, [&] { return fmt::format("matmul {} {}x{} n={}", ggml_type_info(w.type).name, w.n_in, w.n_out, n); });
    im.check(cuda::matmul(w, x, int(n), y, im.ws, im.stream));
  }
  void rope(float* x, uint32_t n, int64_t n_heads, int64_t hd, float base, float lin, const float* freq_div,
            bool neox) {
    OpSpan op(im, [&] { return fmt::format("rope n={}", n); });
    device_op();
    im.check(cuda::rope(x, im.d_pos, n, n_heads, hd, base, lin, freq_div, neox, im.stream));
  }
  void kv_write(uint32_t il, const float* k, const float* v, uint32_t n) {
    OpSpan op(im, [&] { return fmt::format("kv_write n={}", n); });
    // Host KV serves one sequence (create() refuses it with n_seq > 1).
    if (im.host && im.host->kv_on_host(il))
      return im.check(im.host->kv_write(il, k, v, im.host_pos.data(), n, im.stream));
    if (!map.batched())
      return im.check(cuda::kv_write(k, v, im.d_pos, n, spec.kv_width(), im.kv[map.seq][il].store, im.stream));
    // A batched step: runs of rows of one sequence into that sequence's cache (the kernel converts
    // element by element, so splitting the rows changes nothing in what is stored).
    const int64_t width = spec.kv_width();
    for (uint32_t t0 = 0; t0 < n;) {
      uint32_t t1 = t0 + 1;
      while (t1 < n && map.seq_of(t1) == map.seq_of(t0)) ++t1;
      im.check(cuda::kv_write(k + t0 * width, v + t0 * width, im.d_pos + t0, t1 - t0, width,
                              im.kv[map.seq_of(t0)][il].store, im.stream));
      t0 = t1;
    }
  }
  void attention(uint32_t il, const float* q, uint32_t n, const kernels::cpu::AttentionShape& s, float* out) {
    OpSpan op(im, [&] { return fmt::format("attention n={} window={}", n, s.window); });
    if (im.host && im.host->kv_on_host(il))
      return im.check(im.host->attention(il, q, im.host_pos.data(), n, s, out, im.stream));
    device_op();
    const cuda::AttentionShapeDev shape{s.n_head, s.n_head_kv, s.head_dim, s.window, s.scale};
    if (!range && !map.batched())
      return im.check(cuda::attention(q, im.d_pos, n, im.kv[map.seq][il].store, shape, out, im.ws, im.stream));
    // Verification and batched steps: each query exactly as a decode step computes it (same
    // splits, same key tiles), over its own sequence's cache.
    const int64_t row = s.n_head * s.head_dim;
    for (uint32_t t = 0; t < n; ++t)
      im.check(cuda::attention(q + t * row, im.d_pos + t, 1, im.kv[map.seq_of(t)][il].store, shape, out + t * row,
                               im.ws, im.stream));
  }
  void gated_act(model::FfnActivation act, float* gate, const float* up, int64_t count) {
    OpSpan op(im, [&] { return fmt::format("gated_act {}", count); });
    device_op();
    im.check(act == model::FfnActivation::gelu_tanh ? cuda::gelu_tanh_mul(gate, up, count, im.stream)
                                                    : cuda::silu_mul(gate, up, count, im.stream));
  }
  void add(float* x, const float* y, int64_t count) {
    OpSpan op(im, [&] { return fmt::format("add {}", count); });
    device_op();
    im.check(cuda::add(x, y, count, im.stream));
  }
};

}  // namespace

uint64_t CudaForward::streamed_bytes() const { return impl_->store ? impl_->store->stats().bytes_copied : 0; }
double CudaForward::host_compute_seconds() const { return impl_->host ? impl_->host->compute_seconds() : 0.0; }
uint64_t CudaForward::disk_bytes() const { return impl_->store ? impl_->store->stats().disk_bytes : 0; }

namespace {

bool graphs_wanted() {
  const char* e = std::getenv("STRATA_CUDA_GRAPHS");
  return !(e && std::string(e) == "0");
}

}  // namespace

uint64_t CudaForward::kv_bytes_per_seq() const {
  return runtime::kv_bytes_per_seq(model_->spec, opt_.n_ctx, opt_.ubatch, opt_.k_type, opt_.v_type);
}

void CudaForward::run_decode_graph(void* ops_ptr, uint32_t seq, int32_t token) {
  Ops& ops = *static_cast<Ops*>(ops_ptr);
  Impl& im = *impl_;
  const auto& s = model_->spec;
  const RowMap map{seq, n_past_[seq]};
  ops.copy_inputs(&token, 1, map);
  cuda::Graph& graph = im.decode_graph[seq];
  if (!graph) {
    if (!graphs_wanted()) {
      im.graphs_enabled = false;
      forward_chunk(ops, s, im.dev, im.buf, &token, 1, seq, n_past_[seq], 1);
      return;
    }
    im.check(cuda::synchronize(im.stream));  // the input copies are not part of the graph
    im.capturing = true;
    Status st = cuda::capture_begin(im.stream);
    if (st.is_ok()) {
      forward_chunk(ops, s, im.dev, im.buf, &token, 1, seq, n_past_[seq], 1);
      auto g = cuda::capture_end(im.stream);
      if (g) graph = *g;
      else st = g.status();
    }
    im.capturing = false;
    if (!st.is_ok() || !im.first_error.is_ok()) {
      // Not fatal: run this and later steps without a graph.
      log::debug("decode graph capture failed ({}); running without CUDA graphs",
                 st.is_ok() ? im.first_error.message() : st.message());
      im.graphs_enabled = false;
      im.first_error = Status();
      if (graph) cuda::graph_destroy(graph);
      graph = nullptr;
      forward_chunk(ops, s, im.dev, im.buf, &token, 1, seq, n_past_[seq], 1);
      return;
    }
  }
  im.check(cuda::graph_launch(graph, im.stream));
  ops.logits_done(0, 1);
}

Status CudaForward::eval_layers(std::span<const int32_t> tokens, uint32_t pos0, const LayerRange& r, Logits which,
                                std::vector<float>& logits) {
  const auto& s = model_->spec;
  auto range = check_layer_range(s, tokens, pos0, r, n_past_[0], opt_.n_ctx, opt_.ubatch);
  if (!range) return range.status();
  Impl& im = *impl_;
  im.first_error = Status();
  if (Status ws = cuda::set_matmul_workspace(im.d_cublas_ws, cuda::kCublasWorkspaceBytes); !ws)
    return ws.with_context("CUDA forward");
  const uint32_t n = uint32_t(tokens.size()), n_vocab = s.hp.n_vocab;
  logits.resize(which == Logits::all ? n * n_vocab : which == Logits::last ? n_vocab : 0);
  Ops ops{im, s, logits.empty() ? nullptr : logits.data(), &*range, {}};
  const uint32_t rows = which == Logits::all ? n : which == Logits::last ? 1 : 0;
  forward_chunk(ops, s, im.dev, im.buf, tokens.data(), n, RowMap{0, pos0}, rows,
                Layers{range->first, range->end, range->hidden_out != nullptr,
                       range->skip.empty() ? nullptr : range->skip.data()});
  im.check(cuda::synchronize(im.stream));
  if (!im.first_error.is_ok()) return im.first_error.with_context("CUDA forward (layer range)");
  if (range->end == s.hp.n_layer && range->skip.empty()) n_past_[0] = pos0 + n;
  return {};
}

Status CudaForward::eval_batch(std::span<const BatchRow> rows, std::vector<float>& logits) {
  const auto& s = model_->spec;
  auto pos = check_batch_rows(s, rows, n_past_, opt_.n_ctx, opt_.ubatch);
  if (!pos) return pos.status();
  if (rows.size() == 1) return eval(rows[0].seq, std::span(&rows[0].token, 1), Logits::last, logits);
  Impl& im = *impl_;
  im.first_error = Status();
  if (Status ws = cuda::set_matmul_workspace(im.d_cublas_ws, cuda::kCublasWorkspaceBytes); !ws)
    return ws.with_context("CUDA forward (batched step)");
  const uint32_t n = uint32_t(rows.size());
  std::vector<int32_t> tokens(n);
  std::vector<uint32_t> seqs(n);
  for (uint32_t t = 0; t < n; ++t) {
    tokens[t] = rows[t].token;
    seqs[t] = rows[t].seq;
  }
  logits.resize(size_t(n) * s.hp.n_vocab);
  Ops ops{im, s, logits.data(), nullptr, {}};
  TraceScope host_span(opt_.trace.get(), "host", fmt::format("decode step x{}", n));
  // tokens, seqs and pos outlive the asynchronous input copies: synchronized below.
  forward_chunk(ops, s, im.dev, im.buf, tokens.data(), n, RowMap{0, 0, seqs.data(), pos->data()}, n,
                Layers{0, s.hp.n_layer, false, nullptr});
  im.check(cuda::synchronize(im.stream));
  if (im.timeline && im.first_error.is_ok()) im.check(im.timeline->flush());
  if (!im.first_error.is_ok()) return im.first_error.with_context("CUDA forward (batched step)");
  for (uint32_t t = 0; t < n; ++t) n_past_[seqs[t]] = std::max<uint32_t>(n_past_[seqs[t]], uint32_t((*pos)[t]) + 1);
  return {};
}

Status CudaForward::eval(uint32_t seq, std::span<const int32_t> tokens, Logits which, std::vector<float>& logits) {
  const auto& s = model_->spec;
  const uint32_t n_vocab = s.hp.n_vocab;
  if (seq >= n_seq()) return Status::error("sequence {} is out of range (the engine holds {})", seq, n_seq());
  if (tokens.empty()) return Status::error("nothing to evaluate (empty token list)");
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || uint32_t(tokens[i]) >= n_vocab)
      return Status::error("token id {} at index {} is out of range (vocabulary has {} tokens)", tokens[i], i, n_vocab);
  uint32_t& past = n_past_[seq];
  if (uint64_t(past) + tokens.size() > opt_.n_ctx)
    return Status::error("context full: {} tokens already, {} more would exceed the context of {}", past,
                         tokens.size(), opt_.n_ctx);
  Impl& im = *impl_;
  im.first_error = Status();
  // cuBLAS's scratch comes from this engine's arena (another engine may have set its own).
  if (Status ws = cuda::set_matmul_workspace(im.d_cublas_ws, cuda::kCublasWorkspaceBytes); !ws)
    return ws.with_context("CUDA forward");
  Ops ops{im, s, nullptr, nullptr, {}};
  logits.resize(which == Logits::all ? tokens.size() * n_vocab : which == Logits::last ? n_vocab : 0);
  for (size_t done = 0; done < tokens.size();) {
    const uint32_t n = uint32_t(std::min<size_t>(opt_.ubatch, tokens.size() - done));
    const bool last = done + n == tokens.size();
    const uint32_t rows = which == Logits::all ? n : (last && which == Logits::last ? 1 : 0);
    ops.host_logits = rows == 0 ? nullptr : which == Logits::all ? logits.data() + done * n_vocab : logits.data();
    // A CUDA graph replays device work only: a step with host work in it (cpu-tier blocks, host
    // KV, gathered embedding rows) or streamed blocks (a different slot each step) runs eagerly.
    const bool graph = n == 1 && rows == 1 && !im.store && !im.host && !im.host_embed && im.graphs_enabled &&
                       !im.timeline;
    TraceScope host_span(opt_.trace.get(), "host", n == 1 ? "decode step" : fmt::format("prefill {} tokens", n));
    if (graph) {
      run_decode_graph(&ops, seq, tokens[done]);
    } else {
      forward_chunk(ops, s, im.dev, im.buf, tokens.data() + done, n, seq, past, rows);
    }
    im.check(cuda::synchronize(im.stream));
    if (im.timeline && im.first_error.is_ok()) im.check(im.timeline->flush());
    if (!im.first_error.is_ok()) return im.first_error.with_context("CUDA forward");
    past += n;
    done += n;
  }
  return {};
}

}  // namespace strata::runtime
