#include "runtime/cuda_step_graphs.h"

#include <cstdlib>
#include <string>

namespace strata::runtime {

bool tree_graphs_from_env() {
  const char* e = std::getenv("STRATA_TREE_GRAPHS");
  return !(e && std::string(e) == "0");
}

bool host_graphs_from_env() {
  const char* e = std::getenv("STRATA_HOST_GRAPHS");
  return !(e && std::string(e) == "0");
}

GraphPolicy graph_policy_from_env() {
  const char* e = std::getenv("STRATA_CUDA_GRAPHS");
  const std::string v = e ? e : "";
  if (v == "0") return GraphPolicy::off;
  if (v == "decode") return GraphPolicy::resident_decode;
  return GraphPolicy::all;
}

namespace {

// More shapes than a run uses (decode per sequence, a draft per depth, a verify per width, warm and
// cold); past it the cache starts over rather than grow without bound (layer-subset drafts can
// produce many skip masks).
constexpr size_t kMaxStepGraphs = 96;

StepShape shape_of(const model::ModelSpec& s, uint32_t n, const RowMap& map, uint32_t rows, const Layers& L,
                   bool warm, const TreeRows* tree) {
  StepShape k;
  k.n = n;
  k.first = L.first;
  k.end = L.end;
  k.logit_rows = rows;
  k.store_hidden = L.store_hidden;
  if (L.skip) k.skip.assign(L.skip, L.skip + s.hp.n_layer);
  k.window = L.window;
  for (uint32_t t = 0; t < n; ++t) k.seqs.push_back(map.seq_of(t));
  k.warm = warm;
  k.tree = tree != nullptr;
  return k;
}

// Captures the step; null (and graphs off) when the capture fails.
cuda::Graph capture(CudaForward::Impl& im, Ops& ops, const model::ModelSpec& s, const int32_t* tokens, uint32_t n,
                    const RowMap& map, uint32_t rows, Layers L, bool warm) {
  im.check(cuda::synchronize(im.stream));  // the input copies are enqueued before, not inside, the capture
  im.capturing = true;
  im.capture_warm = warm;
  cuda::Graph graph = nullptr;
  Status st = cuda::capture_begin(im.stream);
  if (st.is_ok()) {
    forward_chunk(ops, s, im.dev, im.buf, tokens, n, map, rows, L);
    if (im.store) im.check(im.store->end_graph_schedule());
    auto g = cuda::capture_end(im.stream);
    if (g) graph = *g;
    else st = g.status();
  }
  im.capturing = false;
  if (st.is_ok() && im.first_error.is_ok()) {
    ++im.graph_stats.captures;
    return graph;
  }
  // Not fatal: this and later steps run without graphs.
  log::debug("step graph capture failed ({}); running without CUDA graphs",
             st.is_ok() ? im.first_error.message() : st.message());
  im.graphs_enabled = false;
  im.first_error = Status();
  if (im.store) im.store->abort_graph_schedule();
  if (graph) cuda::graph_destroy(graph);
  return nullptr;
}

}  // namespace

bool run_step_graph(CudaForward::Impl& im, Ops& ops, const model::ModelSpec& s, const int32_t* tokens, uint32_t n,
                    const RowMap& map, uint32_t rows, Layers L) {
  // Host work (cpu-tier blocks, host KV) is in the graph as host nodes (host_compute.h), unless
  // STRATA_HOST_GRAPHS=0 (same-run comparisons).
  if (!im.graphs_enabled || im.timeline || (im.host && !im.host_graphs)) return false;
  if (ops.tree && !im.tree_graphs) return false;
  if (n == 0 || n > kMaxExactRows || rows > offload::kLogitRows) return false;
  const bool resident_decode = !im.store && !im.host_embed && n == 1 && L.first == 0 && L.end == s.hp.n_layer &&
                               !L.skip && !L.window.on() && !L.store_hidden && !map.batched();
  if (im.graph_policy == GraphPolicy::resident_decode && !resident_decode) return false;
  const std::vector<uint32_t> schedule = ops.schedule_for(L, rows > 0);
  if (im.store && !im.store->graphable(schedule)) return false;
  const bool warm = im.store && im.store->prefilled(schedule);
  StepShape key = shape_of(s, n, map, rows, L, warm, ops.tree);

  // Inputs, outside the graph.
  ops.map = map;
  ops.copy_inputs(tokens, n, map);
  const size_t hidden_bytes = size_t(n) * s.hp.n_embd * sizeof(float);
  if (L.first > 0) im.check(cuda::copy_to_device(im.buf.x, ops.range->hidden_in, hidden_bytes, im.stream));
  else if (im.host_embed) ops.gather_host_rows(tokens, n, s.embedding_scale);

  auto it = im.step_graphs.find(key);
  if (it == im.step_graphs.end()) {
    if (im.step_graphs.size() >= kMaxStepGraphs) {
      for (auto& [shape, g] : im.step_graphs) cuda::graph_destroy(g);
      im.step_graphs.clear();
    }
    cuda::Graph g = capture(im, ops, s, tokens, n, map, rows, L, warm);
    if (!g) return false;
    it = im.step_graphs.emplace(std::move(key), g).first;
  }
  if (im.store) im.check(im.store->before_graph_launch());
  im.check(cuda::graph_launch(it->second, im.stream));
  ++im.graph_stats.launches;
  if (im.store) im.check(im.store->graph_launched(schedule, warm));

  // Outputs, outside the graph.
  if (rows > 0) im.logits_to_host(ops.host_logits, im.d_logits, rows, s.hp.n_vocab, ops.takes_argmax(rows));
  if (L.store_hidden) im.check(cuda::copy_to_host(ops.range->hidden_out, im.buf.x, hidden_bytes, im.stream));
  return true;
}

}  // namespace strata::runtime
