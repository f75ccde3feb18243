#include "runtime/cuda_forward.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "core/units.h"
#include "kv/kv_quant.h"
#include "runtime/cuda_engine_state.h"
#include "runtime/cuda_step_graphs.h"

namespace strata::runtime {

CudaForward::CudaForward(std::shared_ptr<const Model> model, ForwardOptions options)
    : model_(std::move(model)), opt_(options), seqs_(sequence_table(model_->spec, options)),
      impl_(std::make_unique<Impl>()) {
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

const gguf::TensorInfo* CudaForward::unsupported_tensor(const Model& model) {
  for (const auto& t : model.file.tensors())
    if (t.ne.size() >= 2 && !cuda::supports_weight_type(t.type)) return &t;
  return nullptr;
}

uint64_t CudaForward::streamed_bytes() const { return impl_->store ? impl_->store->stats().bytes_copied : 0; }
bool CudaForward::shared_ring() const { return impl_->store && impl_->store->stats().shared_ring; }
double CudaForward::host_compute_seconds() const { return impl_->host ? impl_->host->compute_seconds() : 0.0; }
uint64_t CudaForward::disk_bytes() const { return impl_->store ? impl_->store->stats().disk_bytes : 0; }
std::vector<uint8_t> CudaForward::non_resident_layers() const {
  const offload::Placement& pl = opt_.placement;
  const uint32_t n_layer = model_->spec.hp.n_layer;
  std::vector<uint8_t> out(n_layer, 0);
  bool any = false;
  for (uint32_t il = 0; il < n_layer; ++il) {
    out[il] = pl.tier(model::Block::attention, il) != offload::Tier::gpu || pl.tier(model::Block::ffn, il) != offload::Tier::gpu;
    any = any || out[il];
  }
  return any ? out : std::vector<uint8_t>{};
}

CudaForward::GraphStats CudaForward::graph_stats() const { return impl_->graph_stats; }

uint64_t CudaForward::kv_bytes_per_seq() const {
  return runtime::kv_bytes_per_seq(model_->spec, opt_.n_ctx, opt_.ubatch, opt_.k_type, opt_.v_type);
}

Status CudaForward::eval_layers(std::span<const int32_t> tokens, uint32_t pos0, const LayerRange& r, Logits which,
                                std::vector<float>& logits) {
  const auto& s = model_->spec;
  last_argmax_ = -1;
  auto range = check_layer_range(s, tokens, pos0, r, seqs_);
  if (!range) return range.status();
  if (range->window.on() && !supports_draft_window())
    return Status::error("draft window on the CUDA engine needs flash-decoding attention (f16, q8_0 or q4_1 KV; "
                         "head_dim 32, 64, 128 or 256)");
  Impl& im = *impl_;
  im.first_error = Status();
  im.tree.reset();
  if (Status ws = cuda::set_matmul_workspace(im.d_cublas_ws, cuda::kCublasWorkspaceBytes); !ws)
    return ws.with_context("CUDA forward");
  const uint32_t n = uint32_t(tokens.size()), n_vocab = s.hp.n_vocab;
  logits.resize(which == Logits::all ? n * n_vocab : which == Logits::last ? n_vocab : 0);
  Ops ops{im, s, logits.empty() ? nullptr : logits.data(), &*range, {}};
  const uint32_t rows = which == Logits::all ? n : which == Logits::last ? 1 : 0;
  const Layers L{range->first, range->end, range->hidden_out != nullptr,
                 range->skip.empty() ? nullptr : range->skip.data(), range->window};
  if (!run_step_graph(im, ops, s, tokens.data(), n, RowMap{0, pos0}, rows, L))
    forward_chunk(ops, s, im.dev, im.buf, tokens.data(), n, RowMap{0, pos0}, rows, L);
  im.check(cuda::synchronize(im.stream));
  if (!im.first_error.is_ok()) return im.first_error.with_context("CUDA forward (layer range)");
  seqs_.wrote(0, pos0, n, completes_positions(*range, s.hp.n_layer));
  return {};
}

Status CudaForward::eval_batch(std::span<const BatchRow> rows, std::vector<float>& logits) {
  last_argmax_ = -1;
  const auto& s = model_->spec;
  std::vector<uint32_t> seqs;
  auto pos = check_batch_rows(s, rows, seqs_, seqs);
  if (!pos) return pos.status();
  if (rows.size() == 1) return eval(rows[0].seq, std::span(&rows[0].token, 1), Logits::last, logits);
  Impl& im = *impl_;
  im.first_error = Status();
  im.tree.reset();
  if (Status ws = cuda::set_matmul_workspace(im.d_cublas_ws, cuda::kCublasWorkspaceBytes); !ws)
    return ws.with_context("CUDA forward (batched step)");
  const uint32_t n = uint32_t(rows.size());
  std::vector<int32_t> tokens(n);
  for (uint32_t t = 0; t < n; ++t) tokens[t] = rows[t].token;
  logits.resize(size_t(n) * s.hp.n_vocab);
  Ops ops{im, s, logits.data(), nullptr, {}};
  TraceScope host_span(opt_.trace.get(), "host", fmt::format("decode step x{}", n));
  // tokens, seqs and pos outlive the asynchronous input copies: synchronized below.
  const RowMap map{0, 0, seqs.data(), pos->data()};
  const Layers L{0, s.hp.n_layer, false, nullptr};
  if (!run_step_graph(im, ops, s, tokens.data(), n, map, n, L)) forward_chunk(ops, s, im.dev, im.buf, tokens.data(), n, map, n, L);
  im.check(cuda::synchronize(im.stream));
  if (im.timeline && im.first_error.is_ok()) im.check(im.timeline->flush());
  if (!im.first_error.is_ok()) return im.first_error.with_context("CUDA forward (batched step)");
  seqs_.placed(seqs, *pos);
  return {};
}

Status CudaForward::eval(uint32_t seq, std::span<const int32_t> tokens, Logits which, std::vector<float>& logits) {
  const auto& s = model_->spec;
  const uint32_t n_vocab = s.hp.n_vocab;
  STRATA_TRY(seqs_.check_seq(seq));
  if (tokens.empty()) return Status::error("nothing to evaluate (empty token list)");
  last_argmax_ = -1;
  STRATA_TRY(check_tokens(s, tokens));
  STRATA_TRY(seqs_.check_append(seq, tokens.size()));
  Impl& im = *impl_;
  im.first_error = Status();
  im.argmax = -1;
  im.tree.reset();
  // cuBLAS's scratch comes from this engine's arena (another engine may have set its own).
  if (Status ws = cuda::set_matmul_workspace(im.d_cublas_ws, cuda::kCublasWorkspaceBytes); !ws)
    return ws.with_context("CUDA forward");
  Ops ops{im, s, nullptr, nullptr, {}};
  logits.resize(which == Logits::all ? tokens.size() * n_vocab : which == Logits::last ? n_vocab : 0);
  const uint32_t pos0 = n_past(seq);
  // Layer-major groups where the engine has a group buffer (cuda_allocate.cpp says where).
  const uint32_t group = im.group_x ? std::min(prefill_group(opt_, tokens.size(), which), im.group_tokens) : 0;
  for (size_t done = 0; done < tokens.size();) {
    const uint32_t n = uint32_t(std::min<size_t>(group ? group : opt_.ubatch, tokens.size() - done));
    const bool last = done + n == tokens.size();
    const uint32_t p = pos0 + uint32_t(done);
    TraceScope host_span(opt_.trace.get(), "host", n == 1 ? "decode step" : fmt::format("prefill {} tokens", n));
    if (group) {
      ops.host_logits = last && which == Logits::last ? logits.data() : nullptr;
      forward_group(ops, s, im.dev, im.buf, im.group_x, tokens.data() + done, n, opt_.ubatch, seq, p,
                    ops.host_logits != nullptr);
    } else {
      const uint32_t rows = which == Logits::all ? n : (last && which == Logits::last ? 1 : 0);
      ops.host_logits = rows == 0 ? nullptr : which == Logits::all ? logits.data() + done * n_vocab : logits.data();
      // Decode steps replay the graph of their shape (run_step_graph says when they cannot);
      // prefill chunks run eagerly.
      const Layers L{0, s.hp.n_layer, false, nullptr};
      const RowMap map{seq, p};
      if (n != 1 || !run_step_graph(im, ops, s, tokens.data() + done, n, map, rows, L))
        forward_chunk(ops, s, im.dev, im.buf, tokens.data() + done, n, map, rows, L);
    }
    im.check(cuda::synchronize(im.stream));
    if (im.timeline && im.first_error.is_ok()) im.check(im.timeline->flush());
    if (!im.first_error.is_ok()) {
      // n_past stays (engine.h); the table still learns how far the failed call wrote.
      seqs_.wrote(seq, pos0, uint32_t(done) + n, false);
      return im.first_error.with_context("CUDA forward");
    }
    done += n;
  }
  seqs_.append(seq, uint32_t(tokens.size()));
  if (which == Logits::last) last_argmax_ = im.argmax;
  return {};
}

}  // namespace strata::runtime
