// CUDA graphs of engine steps: decode, early-exit drafts, verification and batched decode steps
// (at most kMaxExactRows rows) replayed from one graph per StepShape, resident or streamed.
#pragma once

#include "runtime/cuda_ops.h"

namespace strata::runtime {

// The policy STRATA_CUDA_GRAPHS asks for (GraphPolicy, cuda_engine_state.h): "0" off, "decode"
// resident_decode, anything else all. Read once, when an engine is created.
GraphPolicy graph_policy_from_env();
// Token-tree steps (eval_tree) replay graphs too, one per node count: the shape is a device input,
// since a drafter's trees vary from round to round and capturing each would cost more than it
// saves. STRATA_TREE_GRAPHS=0 runs them eagerly (the A/B switch for the tree graph test and for
// benchmarks). Read once, when an engine is created.
bool tree_graphs_from_env();
// Steps with host work (cpu-tier blocks, host KV) replay graphs too, their host work as host nodes
// (host_compute.h); STRATA_HOST_GRAPHS=0 runs them eagerly (A/B). Measured (27B, --vram 12GiB, 27
// cpu-tier attention blocks, H100 host): 32.0 tok/s graphed vs 29.4 eager. Read at create.
bool host_graphs_from_env();

// Runs the step (the arguments of forward_chunk; ops.host_logits and ops.range set by the caller)
// as the graph of its shape, capturing that on first use, and enqueues the copies of its outputs
// (logits rows, the residual stream for range->hidden_out). Returns false, having enqueued
// nothing that matters, when the step cannot be a graph: disk or host-sourced streamed blocks
// in it, host work with host graphs off, tracing, graphs off, too many rows or logits rows,
// or a capture that failed (then graphs stay off for this engine); the caller runs it eagerly.
bool run_step_graph(CudaForward::Impl& im, Ops& ops, const model::ModelSpec& s, const int32_t* tokens, uint32_t n,
                    const RowMap& map, uint32_t rows, Layers L);

}  // namespace strata::runtime
