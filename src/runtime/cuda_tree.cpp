// Token trees on the CUDA engine (engine.h eval_tree / keep_tree_path; runtime/token_tree.h).
// A node's row must equal the decode step of its root-to-node path bit for bit (greedy
// speculation with trees then gives plain decoding's text). On the GPU a key's lane and chunk in
// flash-decoding follow its slot, so a mask over the nodes' own slots would sum in another order;
// instead each node runs as its path's step: RoPE at its path position pos0 + depth, and attention
// that reads its ancestors' slots in place of the path's positions (attention_tree.h TreePathDev:
// one launch for all the nodes, each block one node's, as a call of its own would be). Matmuls are
// the verify pass's multi-column GEMV, exact per row.
// Replayed as CUDA graphs, one per node count and layer range (the tree's shape is a device input:
// cuda_step_graphs.h); STRATA_TREE_GRAPHS=0 runs tree steps eagerly.
#include <algorithm>

#include "kv/kv_quant.h"
#include "runtime/cuda_engine_state.h"
#include "runtime/cuda_forward.h"
#include "runtime/cuda_ops.h"
#include "runtime/cuda_step_graphs.h"

namespace strata::runtime {

bool CudaForward::supports_trees() const {
  auto flash = [](GgmlType t) { return t == GgmlType::F16 || t == GgmlType::Q8_0 || t == GgmlType::Q4_1; };
  const uint32_t hd = model_->spec.hp.n_embd_head;
  // cpu-tier blocks compute each row alone (host_compute.h), a tree's rows too; host KV has no
  // tree-masked attention.
  const bool host_kv = impl_->host && impl_->host->kv_bytes() > 0;
  return !host_kv && flash(opt_.k_type) && flash(opt_.v_type) && (hd == 32 || hd == 64 || hd == 128 || hd == 256);
}

bool CudaForward::supports_draft_window() const {
  // Attention sinks are in the flash-decoding kernel (attention_decode.cu) and the host's CPU
  // kernel (host KV), not in the tiled and tensor-core kernels that other KV types take.
  auto flash = [](GgmlType t) { return t == GgmlType::F16 || t == GgmlType::Q8_0 || t == GgmlType::Q4_1; };
  const uint32_t hd = model_->spec.hp.n_embd_head;
  return flash(opt_.k_type) && flash(opt_.v_type) && (hd == 32 || hd == 64 || hd == 128 || hd == 256);
}

void CudaForward::truncate(uint32_t seq, uint32_t n) {
  seqs_.truncate(seq, n);
  impl_->tree.reset();
}

Status CudaForward::eval_tree(std::span<const int32_t> tokens, std::span<const int32_t> parents, uint32_t pos0,
                              const LayerRange& r, Logits which, std::vector<float>& logits) {
  last_argmax_ = -1;
  if (!supports_trees()) {
    return Status::error("token trees on the CUDA engine need flash-decoding attention (f16, q8_0 or q4_1 KV; head_dim "
                         "32, 64, 128 or 256) and no host KV (here KV {} / {}, head_dim {}{}); "
                         "chains verify instead",
                         kv::kv_type_name(opt_.k_type), kv::kv_type_name(opt_.v_type), model_->spec.hp.n_embd_head,
                         impl_->host && impl_->host->kv_bytes() > 0 ? ", host KV" : "");
  }
  const auto& s = model_->spec;
  LayerRange range;
  auto shape = check_tree(s, tokens, parents, pos0, r, seqs_, range);
  if (!shape) return shape.status();
  if (range.window.on() && !supports_draft_window())
    return Status::error("draft window on the CUDA engine needs flash-decoding attention");
  Impl& im = *impl_;
  im.first_error = Status();
  if (Status ws = cuda::set_matmul_workspace(im.d_cublas_ws, cuda::kCublasWorkspaceBytes); !ws)
    return ws.with_context("CUDA forward (token tree)");
  im.tree = std::move(*shape);
  im.tree_pos0 = pos0;
  const TreeShape& t = *im.tree;
  const uint32_t n = uint32_t(tokens.size()), node0 = t.size() - n, n_vocab = s.hp.n_vocab;
  // Per row of the call (node i = node0 + row): its path position, its path's length and the path
  // itself, slots[row][depth(j)] = j up i's ancestors (layout: cuda_engine_state.h d_tree_pos).
  im.host_tree.assign(kMaxExactRows * (2 + kMaxExactRows), 0);
  int32_t* pos = im.host_tree.data();
  int32_t* path_n = pos + kMaxExactRows;
  int32_t* slots = path_n + kMaxExactRows;
  for (uint32_t row = 0; row < n; ++row) {
    const uint32_t i = node0 + row;
    pos[row] = int32_t(pos0 + t.depth(i));
    path_n[row] = int32_t(t.depth(i) + 1);
    for (int32_t j = int32_t(i); j >= 0; j = t.parent(uint32_t(j)))
      slots[row * kMaxExactRows + t.depth(uint32_t(j))] = j;
  }
  im.check(cuda::copy_to_device(im.d_tree_pos, im.host_tree.data(), im.host_tree.size() * sizeof(int32_t), im.stream));
  logits.resize(which == Logits::all ? n * n_vocab : which == Logits::last ? n_vocab : 0);
  Ops ops{im, s, logits.empty() ? nullptr : logits.data(), &range, {}};
  const TreeRows rows{&t, pos0, node0};
  ops.tree = &rows;
  const uint32_t logit_rows = which == Logits::all ? n : which == Logits::last ? 1 : 0;
  const Layers L{range.first, range.end, range.hidden_out != nullptr, nullptr, range.window};
  // A graph per node count (the paths and positions are device inputs, copied above), else eagerly
  // (STRATA_TREE_GRAPHS=0, or whatever run_step_graph refuses).
  const RowMap map{0, pos0 + node0};
  if (!run_step_graph(im, ops, s, tokens.data(), n, map, logit_rows, L))
    forward_chunk(ops, s, im.dev, im.buf, tokens.data(), n, map, logit_rows, L);
  im.check(cuda::synchronize(im.stream));
  seqs_.wrote(0, pos0 + node0, n, false);  // n_past stays: keep_tree_path commits
  if (!im.first_error.is_ok()) {
    im.tree.reset();
    return im.first_error.with_context("CUDA forward (token tree)");
  }
  return {};
}

Status CudaForward::keep_tree_path(uint32_t pos0, std::span<const uint32_t> path) {
  Impl& im = *impl_;
  if (!im.tree || im.tree_pos0 != pos0 || n_past(0) != pos0)
    return Status::error("keep_tree_path: no token tree was evaluated at position {} (n_past is {})", pos0, n_past(0));
  STRATA_TRY(im.tree->check_path(path));
  im.first_error = Status();
  const auto& s = model_->spec;
  const size_t k_row = kv::kv_row_bytes(opt_.k_type, s.kv_width()), v_row = kv::kv_row_bytes(opt_.v_type, s.kv_width());
  // Whole rows, whatever the KV type. Ascending j: the slot written (pos0 + j) is never a later
  // entry's source (path[j'] > path[j] >= j).
  for (uint32_t il = 0; il < s.hp.n_layer; ++il) {
    const cuda::KvStoreDev& kv = im.kv[0][il].store;
    for (size_t j = 0; j < path.size(); ++j) {
      if (path[j] == j) continue;
      const int64_t src = (int64_t(pos0) + path[j]) % kv.capacity, dst = (int64_t(pos0) + int64_t(j)) % kv.capacity;
      auto* k = static_cast<uint8_t*>(kv.d_k);
      auto* v = static_cast<uint8_t*>(kv.d_v);
      im.check(cuda::copy_on_device(k + dst * k_row, k + src * k_row, k_row, im.stream));
      im.check(cuda::copy_on_device(v + dst * v_row, v + src * v_row, v_row, im.stream));
    }
  }
  im.check(cuda::synchronize(im.stream));
  if (!im.first_error.is_ok()) return im.first_error.with_context("CUDA forward (keeping a tree path)");
  seqs_.wrote(0, pos0, uint32_t(path.size()), true);
  im.tree.reset();
  return {};
}

}  // namespace strata::runtime
