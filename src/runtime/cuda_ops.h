// The CUDA engine's policy for forward_pass.h (see the Ops contract there): which kernel runs each
// op, where a block's weights come from (resident, acquired from the weight store, or computed on
// the host), and what a CUDA-graph capture leaves out (host copies of inputs and outputs).
#pragma once

#include <array>
#include <functional>
#include <string>
#include <vector>

#include "kernels/cpu/ops.h"
#include "kernels/cuda/act_round.h"
#include "kernels/cuda/attention_tree.h"
#include "kernels/cuda/rope_kv.h"
#include "kernels/cpu/quant_kernels.h"
#include "offload/cost_model.h"
#include "runtime/cuda_engine_state.h"

namespace strata::runtime {


struct Ops {
  CudaForward::Impl& im;
  const model::ModelSpec& spec;
  float* host_logits = nullptr;  // (rows, n_vocab) of the current chunk
  const LayerRange* range = nullptr;  // eval_layers: hidden in/out, attention one query at a time
  RowMap map;                         // the chunk's rows (begin_chunk)
  const TreeRows* tree = nullptr;     // eval_tree: each row is its node's path step (im.d_tree_*)
  // A layer-major group (forward_group): the current chunk's first row in the group's inputs
  // (d_tokens, d_pos, host_pos hold the whole group's, copied once at begin_chunk).
  uint32_t row0 = 0;
  std::string block_name = {};        // the current block ("attn 3"): host compute spans in the trace
  // The RoPE angle tables this chunk's layers filled (rope_dev): positions and configuration.
  struct RopeTable {
    const int32_t* pos = nullptr;
    uint32_t n = 0;
    float base = 0, linear_scale = 0;
    const float* freq_div = nullptr;
    int64_t head_dim = 0;
    bool operator==(const RopeTable&) const = default;
  };
  std::array<RopeTable, CudaForward::Impl::kRopeTables> rope_tables = {};
  int n_rope_tables = 0;

  // The input whose int8 rounding (decode) or f16 copy (prefill) the workspace holds
  // (cuda::matmul_act_key): Q, K and V (gate and up) read the same normed x, so only the first of
  // them rounds or converts it. Any other op may write the
  // workspace or x, so it forgets.
  struct RoundedInput {
    const float* x = nullptr;
    int64_t n_in = 0;
    uint32_t n = 0;
    int key = 0;
    size_t ws_offset = 0;  // where in ws (0, or past x's rounding: gated_matmuls writes the down input's there)
  } rounded = {};
  // The workspace whose start holds rounded's rounding.
  cuda::Workspace rounded_ws() const {
    if (rounded.ws_offset == 0) return im.ws;
    return {static_cast<uint8_t*>(im.ws.d_ptr) + rounded.ws_offset, im.ws.bytes - rounded.ws_offset};
  }

  // Before every device op: it may change the activations the host copied for a cpu-tier matmul,
  // and the workspace or the input of the rounded activations.
  void device_op() {
    if (im.host) im.host->forget_input();
    rounded = {};
  }

  uint32_t logit_rows() const { return offload::kLogitRows; }
  float* logits(uint32_t) { return im.d_logits; }
  void copy_inputs(const int32_t* tokens, uint32_t n, const RowMap& m) {
    for (uint32_t t = 0; t < n; ++t) im.host_pos[t] = m.pos_of(t);
    im.check(cuda::copy_to_device(im.d_tokens, tokens, n * sizeof(int32_t), im.stream));
    im.check(cuda::copy_to_device(im.d_pos, im.host_pos.data(), n * sizeof(int32_t), im.stream));
  }
  // Whether the greedy argmax of these logits is taken on the device (Engine::last_argmax): one
  // row of an eval() (a decode step), not a draft, verify or tree pass (range), whose callers read
  // the logits themselves.
  bool takes_argmax(uint32_t rows) const { return rows == 1 && !range && im.d_argmax_key; }
  void logits_done(uint32_t r0, uint32_t rows) {
    if (takes_argmax(rows))
      im.check(cuda::argmax_key(im.d_logits, int64_t(spec.hp.n_vocab), im.d_argmax_key, im.stream));
    if (im.capturing) return;  // copied after the graph launch
    const size_t nv = spec.hp.n_vocab;
    im.logits_to_host(host_logits + r0 * nv, im.d_logits, rows, nv, takes_argmax(rows));
  }

  // The store blocks a chunk running layers L (and the head when `head`) acquires, in order.
  std::vector<uint32_t> schedule_for(Layers L, bool head) const {
    std::vector<uint32_t> order;
    if (!im.store) return order;
    auto add = [&](Block b, uint32_t il) {
      if (const int32_t id = im.acquired_block(b, il); id >= 0) order.push_back(uint32_t(id));
    };
    for (uint32_t il = L.first; il < L.end; ++il) {
      if (!L.runs(il)) continue;
      add(Block::attention, il);
      add(Block::ffn, il);
    }
    if (head) add(Block::head, 0);
    return order;
  }
  const int32_t* d_pos() const { return im.d_pos + row0; }
  const int32_t* host_pos() const { return im.host_pos.data() + row0; }
  void rows_from(uint32_t t0) { row0 = t0; }
  void begin_chunk(const int32_t* tokens, uint32_t n, const RowMap& m, Layers L, bool head) {
    map = m;
    row0 = 0;
    rounded = {};
    n_rope_tables = 0;  // new positions
    // Host sources outlive the copies: the caller's tokens and im.host_pos stay untouched until
    // eval() synchronizes at the end of the chunk, so no wait (and no allocation) per token here.
    if (!im.capturing) copy_inputs(tokens, n, m);
    // cpu-tier blocks: on the GPU for a prefill chunk (n > kMaxExactRows, never a verification),
    // on the CPU otherwise, where a few rows cost less than moving the block over PCIe.
    im.cpu_blocks_on_gpu = range == nullptr && n > kMaxExactRows;
    if (!im.store) return;
    if (im.capturing) im.check(im.store->begin_graph_schedule(schedule_for(L, head), im.capture_warm));
    else im.check(im.store->set_schedule(schedule_for(L, head)));
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
  // Rows of the host-resident table, decoded on the CPU into the pinned staging (before a graph
  // launch, outside the graph; eagerly, inside embed).
  void gather_host_rows(const int32_t* tokens, uint32_t n, float scale) {
    const auto& t = im.dev.token_embd;
    const auto* k = kernels::cpu::quant_kernels(t.type);
    for (uint32_t i = 0; i < n; ++i) {
      float* row = im.pinned_x + int64_t(i) * t.n_in;
      k->dequantize(t.row(tokens[i]), row, t.n_in);
      if (scale != 1.0f) kernels::cpu::scale(row, scale, t.n_in);
    }
  }
  void embed(const int32_t* tokens, uint32_t n, float scale, float* x) {
    device_op();
    if (!im.host_embed) return im.check(cuda::get_rows(im.dev.token_embd, im.d_tokens + row0, n, scale, x, im.stream));
    // A group's later chunk reuses the staging: the previous chunk's copy must have left it.
    if (row0 > 0) im.check(cuda::synchronize(im.stream));
    // Only n x n_embd floats cross PCIe (a graph replays this copy from the same staging).
    if (!im.capturing) gather_host_rows(tokens, n, scale);
    im.check(cuda::copy_to_device(x, im.pinned_x, size_t(n) * im.dev.token_embd.n_in * sizeof(float), im.stream));
  }
  // Graph steps copy the residual stream in before the launch and out after it.
  void load_hidden(float* x, uint32_t n) {
    if (im.capturing) return;
    device_op();
    im.check(cuda::copy_to_device(x, range->hidden_in, size_t(n) * spec.hp.n_embd * sizeof(float), im.stream));
  }
  void store_hidden(const float* x, uint32_t n) {
    if (im.capturing) return;
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
  // The rounding `next` would make of its input, when the producing kernel should make it.
  cuda::ActRounding rounding_for(const kernels::WeightView* next, int64_t n_in, int64_t rows) const {
    if (!next || !im.fused_rounding || next->n_in != n_in || rows < 1 || rows > cuda::kMaxGemvCols) return {};
    return cuda::act_rounding(*next, int(rows), im.ws);
  }
  void norm(const float* x, const float* w, int64_t n_vec, int64_t dim, float eps, float* out,
            const kernels::WeightView* next = nullptr) {
    OpSpan op(im, [&] { return fmt::format("norm {}x{}", n_vec, dim); });
    device_op();
    const cuda::ActRounding r = rounding_for(next, dim, n_vec);
    im.check(cuda::rms_norm_round(x, w, n_vec, dim, eps, out, r, im.stream));
    if (r.q) rounded = {out, dim, uint32_t(n_vec), r.key};
  }
  // A cpu-tier FFN block runs whole on the host in decode-sized chunks (forward_pass.h ffn_block);
  // a prefill chunk runs it on the GPU through the ring.
  bool ffn_on_host(uint32_t il) const { return im.host && !im.cpu_blocks_on_gpu && im.is_cpu(Block::ffn, il); }
  void host_ffn(uint32_t il, float* x, uint32_t n) {
    device_op();
    im.check(im.host->ffn(il, x, n, im.stream, block_name));
  }
  void matmul(const kernels::WeightView& w, const float* x, uint32_t n, float* y) {
    if (im.host && !im.cpu_blocks_on_gpu) {
      if (auto it = im.host_view.find(&w); it != im.host_view.end())
        return im.check(im.host->matmul(*it->second, x, n, y, im.stream, block_name));
    }
    const int key = cuda::matmul_act_key(w, int(n), im.ws);
    const bool reuse = key != 0 && rounded.key == key && rounded.x == x && rounded.n_in == w.n_in && rounded.n == n;
    const cuda::Workspace ws = reuse ? rounded_ws() : im.ws;
    const size_t ws_offset = reuse ? rounded.ws_offset : 0;
    device_op();
    OpSpan op(im, [&] { return fmt::format("matmul {} {}x{} n={}", ggml_type_info(w.type).name, w.n_in, w.n_out, n); });
    im.check(cuda::matmul(w, x, int(n), y, ws, im.stream, reuse));
    if (key != 0 && y != x) rounded = {x, w.n_in, n, key, ws_offset};
  }
  // Matrices of one input side by side (cuda_engine_state.h "Side"): x rounded once on the main
  // stream (or already, by the norm before), then matrices 1.. on the side streams after a fork
  // event, reading that rounding, and matrix 0 on the main stream, which then waits for them. Each
  // y_j gets the bits matmul() gives it (same kernels, same rounding). Only where every matrix
  // rounds x the same way into ws (GEMV rows, <= kMaxGemvCols), and never where a matrix is
  // computed on the host.
  void matmuls(const MatmulJob* jobs, int count, const float* x, uint32_t n) {
    const int key = cuda::matmul_act_key(*jobs[0].w, int(n), im.ws);
    bool side = count >= 2 && count - 1 <= int(im.side.size()) && n >= 1 && n <= uint32_t(cuda::kMaxGemvCols) && key > 0;
    for (int j = 0; side && j < count; ++j)
      side = (!im.host || im.host_view.find(jobs[j].w) == im.host_view.end()) && jobs[j].w->n_in == jobs[0].w->n_in &&
             cuda::matmul_act_key(*jobs[j].w, int(n), im.ws) == key;
    if (!side) {
      for (int j = 0; j < count; ++j) matmul(*jobs[j].w, x, n, jobs[j].y);
      return;
    }
    const int64_t n_in = jobs[0].w->n_in;
    if (!(rounded.key == key && rounded.x == x && rounded.n_in == n_in && rounded.n == n && rounded.ws_offset == 0)) {
      device_op();
      im.check(cuda::round_act(x, n_in * n, cuda::act_rounding(*jobs[0].w, int(n), im.ws), im.stream));
      rounded = {x, n_in, n, key};
    }
    im.check(cuda::event_record(im.fork, im.stream));
    for (int j = 1; j < count; ++j) {
      const CudaForward::Impl::Side& sd = im.side[size_t(j - 1)];
      im.check(cuda::stream_wait(sd.stream, im.fork));
      im.check(cuda::matmul(*jobs[j].w, x, int(n), jobs[j].y, im.ws, sd.stream, true));
      im.check(cuda::event_record(sd.join, sd.stream));
    }
    matmul(*jobs[0].w, x, n, jobs[0].y);
    for (int j = 1; j < count; ++j) im.check(cuda::stream_wait(im.stream, im.side[size_t(j - 1)].join));
  }
  // FFN gate and up of a one-row step in one kernel with the activation and the down matrix's
  // rounding (act_round.h gated_gemv; forward_pass.h gated_matmuls): one kernel instead of two side
  // by side and the activation after them. The down input's rounding goes past x's in ws (x's is
  // still being read while it is written), and `rounded` says where. False (nothing run) where it
  // does not apply: the caller runs matmuls and gated_act, which give the same bits.
  bool gated_matmuls(model::FfnActivation act, const MatmulJob* gate_up, const float* x, uint32_t n,
                     const kernels::WeightView* next) {
    if (!im.d_gated_counters || n != 1 || !next || !im.ws.d_ptr) return false;
    const kernels::WeightView &gate = *gate_up[0].w, &up = *gate_up[1].w;
    if (im.host && (im.host_view.count(&gate) || im.host_view.count(&up))) return false;
    if (!cuda::gated_gemv_applies(gate, up, int(n))) return false;
    const int key = cuda::matmul_act_key(gate, int(n), im.ws);
    if (key == 0) return false;
    const size_t offset = (cuda::workspace_bytes_for_gemv(gate, int(n)) + 255) / 256 * 256;
    const bool rounds_next = im.fused_rounding && next->n_in == gate.n_out &&
                             offset + cuda::workspace_bytes_for_gemv(*next, int(n)) <= im.ws.bytes;
    const bool have_x = rounded.key == key && rounded.x == x && rounded.n_in == gate.n_in && rounded.n == n &&
                        rounded.ws_offset == 0;
    device_op();
    OpSpan op(im, [&] { return fmt::format("gated_gemv {} {}x{}", ggml_type_info(gate.type).name, gate.n_in, gate.n_out); });
    if (!have_x) im.check(cuda::round_act(x, gate.n_in * n, cuda::act_rounding(gate, int(n), im.ws), im.stream));
    const cuda::Workspace after{static_cast<uint8_t*>(im.ws.d_ptr) + offset, im.ws.bytes - offset};
    const cuda::ActRounding r = rounds_next ? cuda::act_rounding(*next, int(n), after) : cuda::ActRounding{};
    im.check(cuda::gated_gemv(act == model::FfnActivation::gelu_tanh, gate, up, int(n), gate_up[0].y, im.ws, r,
                              im.d_gated_counters, im.stream));
    if (r.q) rounded = {gate_up[0].y, next->n_in, n, r.key, offset};
    return true;
  }
  // The kernels' form of r for rows at positions pos (device) of this chunk. For a step-sized
  // chunk its angles come from a table (cuda_api.h rope_angles) that the first layer of each RoPE
  // configuration fills and the later ones read (Gemma 3: two tables, local and global layers,
  // instead of double pow and sincos in each of ~60 layers' launches).
  cuda::QkRopeDev rope_dev(const QkRope& r, const int32_t* pos, uint32_t n) {
    cuda::QkRopeDev p;
    p.n_head = r.n_head, p.n_head_kv = r.n_head_kv, p.head_dim = r.head_dim;
    p.q_norm = r.q_norm, p.k_norm = r.k_norm, p.eps = r.eps, p.base = r.base, p.linear_scale = r.linear_scale;
    p.freq_div = r.freq_div, p.neox = r.neox;
    if (n > kMaxExactRows || r.head_dim / 2 > im.kRopeTableHalf || !im.d_rope_angles) return p;
    const RopeTable key{pos, n, r.base, r.linear_scale, r.freq_div, r.head_dim};
    const size_t per_table = size_t(kMaxExactRows) * size_t(im.kRopeTableHalf) * 2;
    for (int i = 0; i < n_rope_tables; ++i) {
      if (rope_tables[size_t(i)] == key) {
        p.angles = im.d_rope_angles + size_t(i) * per_table;
        return p;
      }
    }
    if (n_rope_tables == im.kRopeTables) return p;  // more configurations: the kernel computes them
    float* table = im.d_rope_angles + size_t(n_rope_tables) * per_table;
    im.check(cuda::rope_angles(pos, n, p, table, im.stream));
    rope_tables[size_t(n_rope_tables++)] = key;
    p.angles = table;
    return p;
  }
  void qk_norm_rope(float* q, float* k, uint32_t n, const QkRope& r) {
    OpSpan op(im, [&] { return fmt::format("qk_norm_rope n={}", n); });
    device_op();
    // A tree node turns at its path position, not at its slot.
    const int32_t* pos = tree ? im.d_tree_pos : d_pos();
    im.check(cuda::qk_norm_rope(q, k, pos, n, rope_dev(r, pos, n), im.stream));
  }
  // One kernel for one sequence's rows into a device cache (rope_kv.h); else the two ops.
  void rope_kv_write(uint32_t il, float* q, float* k, const float* v, uint32_t n, const QkRope& r) {
    const bool fuse = im.fused_rounding && !map.batched() && !tree && !(im.host && im.host->kv_on_host(il)) &&
                      cuda::qk_norm_rope_kv_applies(im.kv[map.seq][il].store, r.head_dim);
    if (!fuse) {
      qk_norm_rope(q, k, n, r);
      return kv_write(il, k, v, n);
    }
    OpSpan op(im, [&] { return fmt::format("qk_norm_rope_kv n={}", n); });
    device_op();
    im.check(cuda::qk_norm_rope_kv(q, k, v, d_pos(), n, rope_dev(r, d_pos(), n), im.kv[map.seq][il].store, im.stream));
  }
  void kv_write(uint32_t il, const float* k, const float* v, uint32_t n) {
    rounded = {};
    OpSpan op(im, [&] { return fmt::format("kv_write n={}", n); });
    // Host KV serves one sequence (create() refuses it with n_seq > 1).
    if (im.host && im.host->kv_on_host(il))
      return im.check(im.host->kv_write(il, k, v, host_pos(), n, im.stream));
    if (!map.batched())
      return im.check(cuda::kv_write(k, v, d_pos(), n, spec.kv_width(), im.kv[map.seq][il].store, im.stream));
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
  // The attention's scratch: past the rounding of its output (every call alike, so that the
  // kernel's split count, and with it a row's bits, never depends on the path), through the end of
  // ws and the attention's counters after it (cuda_engine_state.h att_ws_bytes).
  cuda::Workspace att_ws() const {
    if (!im.ws.d_ptr) return {};
    return {static_cast<uint8_t*>(im.ws.d_ptr) + im.att_round_bytes, im.att_ws_bytes};
  }
  void attention(uint32_t il, const float* q, uint32_t n, const kernels::cpu::AttentionShape& s, float* out,
                 const kernels::WeightView* next = nullptr) {
    OpSpan op(im, [&] { return fmt::format("attention n={} window={} sinks={}", n, s.window, s.sinks); });
    if (im.host && im.host->kv_on_host(il))
      return im.check(im.host->attention(il, q, host_pos(), n, s, out, im.stream));
    device_op();
    const cuda::AttentionShapeDev shape{s.n_head, s.n_head_kv, s.head_dim, s.window, s.scale, s.sinks};
    const cuda::Workspace ws = att_ws();
    if (tree) {  // each node as the decode step of its path (attention_tree.h): its row's exact bits
      const cuda::KvStoreDev& kv = im.kv[0][il].store;
      const cuda::TreePathDev paths{im.d_tree_slots, im.d_tree_n, int32_t(kMaxExactRows)};
      if (cuda::attention_rows_exact(q, n, kv, shape, ws))  // one launch for all the nodes
        return im.check(cuda::attention_tree_path(q, im.d_tree_pos, n, kv, shape, paths, out, ws, im.stream));
      const int64_t row = s.n_head * s.head_dim;
      for (uint32_t t = 0; t < n; ++t) {
        const cuda::TreePathDev path{im.d_tree_slots + t * kMaxExactRows, im.d_tree_n + t};
        im.check(cuda::attention_tree_path(q + t * row, im.d_tree_pos + t, 1, kv, shape, path, out + t * row, ws,
                                           im.stream));
      }
      return;
    }
    // One call, unless this is a verify pass (range) whose rows must equal decode steps and the
    // kernel does not promise that for a multi-query call. Where it runs split, its merging blocks
    // round the output for `next` (the rounding fits before ws).
    if (!map.batched() && (!range || cuda::attention_rows_exact(q, n, im.kv[map.seq][il].store, shape, ws))) {
      const int64_t width = s.n_head * s.head_dim;
      cuda::ActRounding r = rounding_for(next, width, n);
      if (r.q && cuda::workspace_bytes_for_gemv(*next, int(n)) > im.att_round_bytes) r = {};
      bool made = false;
      im.check(cuda::attention_round(q, d_pos(), n, im.kv[map.seq][il].store, shape, out, ws, r, &made, im.stream));
      if (made) rounded = {out, width, n, r.key};
      return;
    }
    // Verification (otherwise) and batched steps: each query exactly as a decode step computes it
    // (same splits, same key tiles), over its own sequence's cache.
    const int64_t row = s.n_head * s.head_dim;
    for (uint32_t t = 0; t < n; ++t)
      im.check(cuda::attention(q + t * row, im.d_pos + t, 1, im.kv[map.seq_of(t)][il].store, shape, out + t * row,
                               ws, im.stream));
  }
  void gated_act(model::FfnActivation act, float* gate, const float* up, int64_t count,
                 const kernels::WeightView* next = nullptr) {
    OpSpan op(im, [&] { return fmt::format("gated_act {}", count); });
    device_op();
    const int64_t rows = next && next->n_in > 0 && count % next->n_in == 0 ? count / next->n_in : 0;
    const cuda::ActRounding r = rounding_for(next, next ? next->n_in : 0, rows);
    im.check(cuda::gated_act_round(act == model::FfnActivation::gelu_tanh, gate, up, count, r, im.stream));
    if (r.q) rounded = {gate, next->n_in, uint32_t(rows), r.key};
  }
  void add(float* x, const float* y, int64_t count) {
    OpSpan op(im, [&] { return fmt::format("add {}", count); });
    device_op();
    im.check(cuda::add(x, y, count, im.stream));
  }
  // Blocks not acquired from the store: a streamed block's post-norm weight leaves with the block
  // at end_block (so in a streamed engine the resident blocks fuse, the draft path of early exit
  // among them, and so do decode's cpu-tier attention blocks, whose norms are in VRAM like every
  // norm); a trace keeps each block's kernels inside its span.
  bool fuses_residual(Block b, uint32_t il) const {
    return im.fused_rounding && !im.timeline && im.acquired_block(b, il) < 0;
  }
  void add_norm(float* x, float* h, const float* post_w, const float* w, int64_t n_vec, int64_t dim, float eps,
                float* out, const kernels::WeightView* next) {
    OpSpan op(im, [&] { return fmt::format("add_norm {}x{}", n_vec, dim); });
    device_op();
    const cuda::ActRounding r = rounding_for(next, dim, n_vec);
    im.check(cuda::add_rms_norm_round(x, h, post_w != nullptr, post_w, w, n_vec, dim, eps, out, r, im.stream));
    if (r.q) rounded = {out, dim, uint32_t(n_vec), r.key};
  }
  void norm_add(float* x, float* h, const float* w, int64_t n_vec, int64_t dim, float eps) {
    OpSpan op(im, [&] { return fmt::format("norm_add {}x{}", n_vec, dim); });
    device_op();
    im.check(cuda::rms_norm_add(h, w, n_vec, dim, eps, x, im.stream));
  }
};


}  // namespace strata::runtime
