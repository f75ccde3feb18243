// The CUDA backend's functions in a build without CUDA: each says so. Keeps callers free of #ifdefs
// and makes a CPU-only build link (CTranslate2's pattern).
#include "kernels/cuda/act_round.h"
#include "kernels/cuda/attention_tree.h"
#include "kernels/cuda/cuda_api.h"
#include "kernels/cuda/gemv_tuning.h"
#include "kernels/cuda/read_probe.h"
#include "kernels/cuda/rope_kv.h"

namespace strata::kernels::cuda {
namespace {
Status none(const char* op) { return Status::error("{}: strata was built without CUDA", op); }
}  // namespace

Result<void*> device_alloc(size_t) { return none("device_alloc"); }
void device_free(void*) {}
Status copy_to_device(void*, const void*, size_t, Stream) { return none("copy_to_device"); }
Status copy_to_host(void*, const void*, size_t, Stream) { return none("copy_to_host"); }
Status copy_on_device(void*, const void*, size_t, Stream) { return none("copy_on_device"); }
Status memset_device(void*, int, size_t, Stream) { return none("memset_device"); }
Status synchronize(Stream) { return none("synchronize"); }
Status launch_host_func(Stream, void (*)(void*), void*) { return none("launch_host_func"); }
Status copy_by_kernel(void*, const void*, size_t, Stream) { return none("copy_by_kernel"); }
Result<void*> mapped_device_pointer(void*) { return none("mapped_device_pointer"); }
Result<Stream> stream_create() { return none("stream_create"); }
void stream_destroy(Stream) {}
Result<void*> pinned_alloc(size_t) { return none("pinned_alloc"); }
void pinned_free(void*) {}
Result<Event> event_create() { return none("event_create"); }
void event_destroy(Event) {}
Status event_record(Event, Stream) { return none("event_record"); }
Result<Event> event_create_timed() { return none("event_create_timed"); }
Result<float> event_elapsed_ms(Event, Event) { return none("event_elapsed_ms"); }
Status event_synchronize(Event) { return none("event_synchronize"); }
Result<bool> event_done(Event) { return none("event_done"); }
Status stream_wait(Stream, Event) { return none("stream_wait"); }
Status event_record_external(Event, Stream) { return none("event_record_external"); }
Result<MemInfo> mem_info() { return none("mem_info"); }
Status capture_begin(Stream) { return none("capture_begin"); }
Result<Graph> capture_end(Stream) { return none("capture_end"); }
Status graph_launch(Graph, Stream) { return none("graph_launch"); }
void graph_destroy(Graph) {}
Status set_matmul_workspace(void*, size_t) { return none("set_matmul_workspace"); }
void inject_error(uint64_t) {}
Status gemv(const WeightView&, const float*, int, float*, Stream) { return none("gemv"); }
Status gemv(const WeightView&, const float*, int, float*, Workspace, Stream, bool) { return none("gemv"); }
int gemv_act_key(const WeightView&, int, Workspace) { return 0; }
size_t workspace_bytes_for_gemv(const WeightView&, int) { return 0; }
void set_gemv_mma_min_cols(int) {}
void set_gemv_pdl(bool) {}
void set_gemv_warps(int) {}
void set_gemv_mma_persist_from(int) {}
void set_gated_gemv_variant(int) {}
size_t workspace_bytes_for_gemm(const WeightView&, int) { return 0; }
Status gemm(const WeightView&, const float*, int, float*, Workspace, Stream, bool) { return none("gemm"); }
int matmul_act_key(const WeightView&, int, Workspace) { return 0; }
Status matmul(const WeightView&, const float*, int, float*, Workspace, Stream, bool) { return none("matmul"); }
Status dequantize_rows(const WeightView&, int64_t, int64_t, float*, Stream) { return none("dequantize_rows"); }
bool supports_weight_type(GgmlType) { return false; }
ActRounding act_rounding(const WeightView&, int, Workspace) { return {}; }
Status round_act(const float*, int64_t, const ActRounding&, Stream) { return none("round_act"); }
Status rms_norm_round(const float*, const float*, int64_t, int64_t, float, float*, const ActRounding&, Stream) {
  return none("rms_norm_round");
}
Status add_rms_norm_round(float*, const float*, bool, const float*, const float*, int64_t, int64_t, float, float*,
                          const ActRounding&, Stream) {
  return none("add_rms_norm_round");
}
Status attention_round(const float*, const int32_t*, int64_t, const KvStoreDev&, const AttentionShapeDev&, float*,
                       Workspace, const ActRounding&, bool*, Stream) {
  return none("attention_round");
}
bool qk_norm_rope_kv_applies(const KvStoreDev&, int64_t) { return false; }
Status qk_norm_rope_kv(float*, float*, const float*, const int32_t*, int64_t, const QkRopeDev&, const KvStoreDev&, Stream) {
  return none("qk_norm_rope_kv");
}
Status gated_act_round(bool, float*, const float*, int64_t, const ActRounding&, Stream) { return none("gated_act_round"); }
bool gated_gemv_applies(const WeightView&, const WeightView&, int) { return false; }
Status gated_gemv(bool, const WeightView&, const WeightView&, int, float*, Workspace, const ActRounding&, unsigned*, Stream) {
  return none("gated_gemv");
}
Status rms_norm(const float*, const float*, int64_t, int64_t, float, float*, Stream) { return none("rms_norm"); }
Status rope(float*, const int32_t*, int64_t, int64_t, int64_t, float, float, const float*, bool, Stream) {
  return none("rope");
}
Status silu_mul(float*, const float*, int64_t, Stream) { return none("silu_mul"); }
Status gelu_tanh_mul(float*, const float*, int64_t, Stream) { return none("gelu_tanh_mul"); }
Status add(float*, const float*, int64_t, Stream) { return none("add"); }
Status rms_norm_add(const float*, const float*, int64_t, int64_t, float, float*, Stream) { return none("rms_norm_add"); }
Status qk_norm_rope(float*, float*, const int32_t*, int64_t, const QkRopeDev&, Stream) { return none("qk_norm_rope"); }
Status argmax_key(const float*, int64_t, unsigned long long*, Stream) { return none("argmax"); }
Status rope_angles(const int32_t*, int64_t, const QkRopeDev&, float*, Stream) { return none("rope_angles"); }
Status get_rows(const WeightView&, const int32_t*, int64_t, float, float*, Stream) { return none("get_rows"); }
Status attention_tree_path(const float*, const int32_t*, int64_t, const KvStoreDev&, const AttentionShapeDev&,
                           const TreePathDev&, float*, Workspace, Stream) {
  return none("attention_tree_path");
}
size_t attention_workspace_bytes(int64_t, const AttentionShapeDev&, int64_t) { return 0; }
Status attention_workspace_clear(Workspace, Stream) { return none("attention_workspace_clear"); }
bool attention_rows_exact(const float*, int64_t, const KvStoreDev&, const AttentionShapeDev&, Workspace) { return false; }
Status attention(const float*, const int32_t*, int64_t, const KvStoreDev&, const AttentionShapeDev&, float*, Workspace,
                 Stream, AttentionKernel) {
  return none("attention");
}
Status kv_write(const float*, const float*, const int32_t*, int64_t, int64_t, const KvStoreDev&, Stream) {
  return none("kv_write");
}

Result<double> measure_read_bandwidth(size_t, int) { return none("measure_read_bandwidth"); }
Result<double> measure_h2d_bandwidth(size_t, size_t, int) { return none("measure_h2d_bandwidth"); }
Result<double> measure_gemm_flops(int, int) { return none("measure_gemm_flops"); }
Result<double> measure_int8_gemm_ops(int, int) { return none("measure_int8_gemm_ops"); }
Result<double> time_on_device(const std::function<Status()>&, int, Stream) { return none("time_on_device"); }

}  // namespace strata::kernels::cuda
