// strata bench kernels: the CUDA kernels on the 27B shapes against ceilings measured in the same
// run (device read of a large buffer, a large cuBLAS bf16 GEMM), as a table and JSON.
//
// - GEMV (decode, batch 1 and 8): GB/s of weight bytes over the device read ceiling. Each shape is
//   replicated into enough distinct buffers to cover >= 4x the L2 cache (H200: 60 MB), and the
//   timed pass walks all of them, so the figures are HBM, not cache. Both weight layouts: GGUF
//   (batch 1 and 8, the baseline) and, for the repacked types, the GPU layout (kernels/gpu_layout.h)
//   at 1, 2, 4, 8, 16, 32 and 64 columns on the engine's kernels (dp4a below kGemvMmaFromCols
//   columns, MMA from it), and in a CUDA graph: the engine's choice (1..64 columns) and each kernel
//   forced (1..16 columns; m8/d1 is the MMA kernel's 8 columns over the dp4a kernel's 1). Each
//   graph figure but the last ("alone1": 1 column, activations rounded once before the graph, as the
//   engine's fused norms leave them) includes the activation quantiser's launch per matrix.
//   GB/s always counts the GGUF bytes of the matrix (what a token's time is made of; the GPU layout
//   has the same size but for padding rows, see gpu_layout.h).
// - Prefill matmul at M = 2048 (dequantised f16 tiles + cuBLAS): TFLOP/s over the bf16 GEMM rate.
// - Decode attention (one query, flash-decoding) for f16, q8 and q4 KV at 32K and 128K keys: GB/s
//   of KV bytes over the device read ceiling, next to the tiled kernel it replaced.
// - Prefill attention (a chunk of 512 or 2048 queries ending at 32K / 128K keys, the tensor-core
//   kernel) for f16, q8 and q4 KV: TFLOP/s (4 * n_head * head_dim per visible (query, key) pair)
//   over the bf16 GEMM ceiling, next to the tiled f32 kernel that ran before (512-query chunks).
#include <algorithm>
#include <functional>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/bench_compare.h"
#include "cli/bench_kernels.h"
#include "core/half.h"
#include "core/log.h"
#include "core/rng.h"
#include "core/units.h"
#include "kernels/cpu/quant_kernels.h"
#include "kernels/cuda/cuda_api.h"
#include "kernels/cuda/device_info.h"
#include "kernels/cuda/read_probe.h"
#include "kernels/gpu_layout.h"
#include "kv/kv_quant.h"

namespace strata::cli {
namespace {

namespace cuda = kernels::cuda;

struct BenchKernelsArgs {
  std::string types = "q3_K,q4_K,q5_K,q6_K,q8_0,iq3_xxs,iq3_s,iq4_xs";  // the i-quants: M13's GEMV targets
  uint64_t l2_cover = 240'000'000;  // 4 x the H200's 60 MB L2
  std::vector<uint32_t> ctx = {32768, 131072};  // keys of the decode and prefill attention figures
  std::string kv = "f16,q8,q4";                  // KV types of the decode and prefill attention figures
  std::vector<uint32_t> prefill_q = {512, 2048};  // queries per chunk of the prefill attention figures
  int iters = 5;
  bool quick = false;  // one shape per type, smaller context: a smoke run
  std::string shapes = "qkv,ffn_up,ffn_down,head";  // which 27B GEMV shapes (one alone: e.g. under ncu)
  std::string json_out;
  BenchCompare compare;
};

// Device buffers freed on scope exit.
struct DeviceBuffers {
  std::vector<void*> ptrs;
  ~DeviceBuffers() {
    for (void* p : ptrs) cuda::device_free(p);
  }
  Result<void*> alloc(size_t bytes) {
    auto p = cuda::device_alloc(bytes);
    if (p) ptrs.push_back(*p);
    return p;
  }
};

// Times `enqueue` (on the given stream) captured once as a CUDA graph and replayed: how the
// engine runs every decode, draft and verify step, so the figure has no per-launch host cost
// (eager back-to-back calls pay ~8 us each here, more than a 4096-row matrix takes to read).
Result<double> time_as_graph(const std::function<Status(cuda::Stream)>& enqueue, int iters) {
  auto st = cuda::stream_create();
  if (!st) return st.status();
  struct StreamGuard {
    cuda::Stream s;
    ~StreamGuard() { cuda::stream_destroy(s); }
  } guard{*st};
  STRATA_TRY(cuda::capture_begin(*st));
  const Status e = enqueue(*st);
  auto g = cuda::capture_end(*st);
  if (!e) {
    if (g) cuda::graph_destroy(*g);
    return e;
  }
  if (!g) return g.status();
  auto t = cuda::time_on_device([&] { return cuda::graph_launch(*g, *st); }, iters, *st);
  cuda::graph_destroy(*g);
  return t;
}

struct Shape {
  const char* key;  // --shapes
  const char* name;
  int64_t n_in, n_out;
};
// The 27B (gemma3-27b) matrices the issue names.
constexpr Shape kShapes[] = {{"qkv", "qkv 5376x4096", 5376, 4096},
                             {"ffn_up", "ffn up 5376x21504", 5376, 21504},
                             {"ffn_down", "ffn down 21504x5376", 21504, 5376},
                             {"head", "head 5376x262144", 5376, 262144}};

// The comma-separated --shapes keys, checked against kShapes.
Result<std::vector<std::string>> shape_keys(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream ss(list);
  for (std::string k; std::getline(ss, k, ',');) {
    if (std::none_of(std::begin(kShapes), std::end(kShapes), [&](const Shape& sh) { return k == sh.key; }))
      return Status::error("--shapes: '{}' is not one of qkv, ffn_up, ffn_down, head", k);
    out.push_back(k);
  }
  return out;
}

Result<nlohmann::json> bench_gemv(GgmlType type, const Shape& sh, const BenchKernelsArgs& a, double read_bw,
                                  double gemm_flops) {
  const auto* k = kernels::cpu::quant_kernels(type);
  if (!k) return Status::error("no kernels for {}", ggml_type_info(type).name);
  const uint64_t row_bytes = ggml_row_bytes(type, uint64_t(sh.n_in));
  const uint64_t bytes = row_bytes * uint64_t(sh.n_out);
  std::vector<uint8_t> host(bytes);
  Rng rng(7);
  k->fill_random(host.data(), sh.n_in * sh.n_out, rng, 0.02f);
  const int copies = int(std::max<uint64_t>(1, (a.l2_cover + bytes - 1) / bytes));
  DeviceBuffers mem;
  std::vector<kernels::WeightView> views;
  for (int c = 0; c < copies; ++c) {
    auto p = mem.alloc(bytes);
    if (!p) return p.status();
    STRATA_TRY(cuda::copy_to_device(*p, host.data(), bytes, nullptr));
    views.push_back({static_cast<const uint8_t*>(*p), type, sh.n_in, sh.n_out, row_bytes});
  }
  constexpr int kCols = 2048;
  std::vector<float> xh(size_t(kCols) * sh.n_in);
  for (auto& v : xh) v = float(rng.uniform(-1.0f, 1.0f));
  auto x = mem.alloc(xh.size() * sizeof(float));
  auto y = mem.alloc(size_t(kCols) * sh.n_out * sizeof(float));
  if (!x) return x.status();
  if (!y) return y.status();
  STRATA_TRY(cuda::copy_to_device(*x, xh.data(), xh.size() * sizeof(float), nullptr));
  const float* dx = static_cast<const float*>(*x);
  float* dy = static_cast<float*>(*y);

  nlohmann::json j = {{"type", ggml_type_info(type).name}, {"shape", sh.name}, {"n_in", sh.n_in},
                      {"n_out", sh.n_out}, {"weight_bytes", bytes}, {"buffers", copies}};
  // The engine's GEMV: int8 activations when the type has that path (a workspace given).
  const size_t gws_bytes = cuda::workspace_bytes_for_gemv(views[0], cuda::kMaxGpuGemvCols);
  void* gws = nullptr;
  if (gws_bytes) {
    auto p = mem.alloc(gws_bytes);
    if (!p) return p.status();
    gws = *p;
  }
  j["gemv_path"] = gws_bytes ? "int8 activations (dp4a)" : "f32 activations";
  double t1 = 0;
  for (int cols : {0, 1, 8}) {  // 0: batch 1 on the f32-activation kernel, for comparison
    auto t = cuda::time_on_device(
        [&]() -> Status {
          for (const auto& v : views)
            STRATA_TRY(cols == 0 ? cuda::gemv(v, dx, 1, dy, nullptr)
                                 : cuda::gemv(v, dx, cols, dy, {gws, gws_bytes}, nullptr));
          return Status::ok();
        },
        a.iters, nullptr);
    if (!t) return t.status();
    const double per = *t / copies;
    const double gbps = double(bytes) / per / 1e9;
    if (cols == 0) {
      j["gemv1_f32act_gb_s"] = gbps;
      j["gemv1_f32act_fraction_of_read"] = gbps * 1e9 / read_bw;
      continue;
    }
    j[fmt::format("gemv{}_us", cols)] = per * 1e6;
    j[fmt::format("gemv{}_gb_s", cols)] = gbps;
    j[fmt::format("gemv{}_fraction_of_read", cols)] = gbps * 1e9 / read_bw;
    if (cols == 1) t1 = per;
    else j["gemv8_over_gemv1"] = per / t1;
  }
  // The GPU layout: the same matrix repacked once on the host, then copied to its own buffers.
  if (const uint64_t gbytes = kernels::gpu_layout_bytes(type, sh.n_in, sh.n_out); gbytes && gws_bytes) {
    std::vector<uint8_t> packed(gbytes);
    kernels::repack_to_gpu_layout({host.data(), type, sh.n_in, sh.n_out, row_bytes}, packed.data());
    std::vector<kernels::WeightView> gviews;
    const int gcopies = int(std::max<uint64_t>(1, (a.l2_cover + gbytes - 1) / gbytes));
    for (int c = 0; c < gcopies; ++c) {
      auto p = mem.alloc(gbytes);
      if (!p) return p.status();
      STRATA_TRY(cuda::copy_to_device(*p, packed.data(), gbytes, nullptr));
      gviews.push_back(kernels::gpu_layout_view(static_cast<const uint8_t*>(*p), type, sh.n_in, sh.n_out));
    }
    j["gpu_layout_bytes"] = gbytes;
    double g1 = 0;
    for (int cols : {1, 2, 4, 8, 16, 32, 64}) {
      auto t = cuda::time_on_device(
          [&]() -> Status {
            for (const auto& v : gviews) STRATA_TRY(cuda::gemv(v, dx, cols, dy, {gws, gws_bytes}, nullptr));
            return Status::ok();
          },
          a.iters, nullptr);
      if (!t) return t.status();
      const double per = *t / gcopies;
      const double gbps = double(bytes) / per / 1e9;
      j[fmt::format("gpu_gemv{}_us", cols)] = per * 1e6;
      j[fmt::format("gpu_gemv{}_gb_s", cols)] = gbps;
      j[fmt::format("gpu_gemv{}_fraction_of_read", cols)] = gbps * 1e9 / read_bw;
      if (cols == 1) g1 = per;
      else j[fmt::format("gpu_gemv{}_over_gemv1", cols)] = per / g1;
    }
    // Inside a CUDA graph (activation quantiser + GEMV per matrix): as the engine runs them (graph_gpu,
    // the default choice of kernel per count), then each kernel forced (dp4a: up to its 16 columns).
    // Both give every column the same bits, so the engine's choice is a speed choice only.
    auto graph_time = [&](int cols) -> Result<double> {
      auto t = time_as_graph(
          [&](cuda::Stream st) -> Status {
            for (const auto& v : gviews) STRATA_TRY(cuda::gemv(v, dx, cols, dy, {gws, gws_bytes}, st));
            return Status::ok();
          },
          a.iters);
      if (!t) return t.status();
      return *t / gcopies;
    };
    struct Variant {
      const char* key;
      int mma_from;
      std::vector<int> cols;
    };
    for (const Variant& var : {Variant{"gpu", cuda::kGemvMmaFromCols, {1, 2, 4, 8, 16, 32, 64}},
                               Variant{"dp4a", cuda::kMaxGpuGemvCols + 1, {1, 2, 4, 8, 16}},
                               Variant{"mma", 1, {1, 2, 4, 8, 16}}}) {
      cuda::set_gemv_mma_min_cols(var.mma_from);
      for (int cols : var.cols) {
        auto per = graph_time(cols);
        if (!per) {
          cuda::set_gemv_mma_min_cols(cuda::kGemvMmaFromCols);
          return per.status();
        }
        j[fmt::format("graph_{}_gemv{}_us", var.key, cols)] = *per * 1e6;
        j[fmt::format("graph_{}_gemv{}_fraction_of_read", var.key, cols)] = double(bytes) / *per / read_bw;
      }
    }
    cuda::set_gemv_mma_min_cols(cuda::kGemvMmaFromCols);
    // 1 column with programmatic dependent launch (opt-in, sm_90): the GEMV overlaps the quantiser.
    cuda::set_gemv_pdl(true);
    auto tp = time_as_graph(
        [&](cuda::Stream st) -> Status {
          for (const auto& v : gviews) STRATA_TRY(cuda::gemv(v, dx, 1, dy, {gws, gws_bytes}, st));
          return Status::ok();
        },
        a.iters);
    cuda::set_gemv_pdl(false);
    if (!tp) return tp.status();
    j["graph_pdl_gemv1_fraction_of_read"] = double(bytes) / (*tp / gcopies) / read_bw;
    // 1 column, the GEMV alone (its activations rounded once, before the graph): as the engine runs
    // its GEMVs, whose input the norm or the previous GEMV rounds in its own kernel (norm.cu,
    // gemv_gated.cu), so the figure is the GEMV kernel's, without the quantiser's launch.
    STRATA_TRY(cuda::gemv(gviews[0], dx, 1, dy, {gws, gws_bytes}, nullptr));
    STRATA_TRY(cuda::synchronize(nullptr));
    auto ta = time_as_graph(
        [&](cuda::Stream st) -> Status {
          for (const auto& v : gviews) STRATA_TRY(cuda::gemv(v, dx, 1, dy, {gws, gws_bytes}, st, true));
          return Status::ok();
        },
        a.iters);
    if (!ta) return ta.status();
    j["graph_alone_gemv1_us"] = *ta / gcopies * 1e6;
    j["graph_alone_gemv1_fraction_of_read"] = double(bytes) / (*ta / gcopies) / read_bw;
  }
  // Prefill matmul at M = 2048 columns on one buffer (compute-bound: the cache does not matter).
  if (gemm_flops > 0 && sh.n_out <= 32768) {
    const size_t ws_bytes = cuda::workspace_bytes_for_gemm(views[0], kCols);
    auto ws = mem.alloc(ws_bytes);
    if (!ws) return ws.status();
    auto t = cuda::time_on_device([&] { return cuda::gemm(views[0], dx, kCols, dy, {*ws, ws_bytes}, nullptr); },
                                  a.iters, nullptr);
    if (!t) return t.status();
    const double flops = 2.0 * double(sh.n_in) * double(sh.n_out) * kCols / *t;
    j["gemm2048_tflops"] = flops / 1e12;
    j["gemm2048_fraction_of_bf16"] = flops / gemm_flops;
  }
  return j;
}

struct GemvFloor {
  double eager_s, graph_s, graph_gemv_only_s;
};
Result<GemvFloor> bench_gemv_floor(const BenchKernelsArgs& a) {
  constexpr int64_t n_in = 256, n_out = 8;
  const auto* k = kernels::cpu::quant_kernels(GgmlType::Q4_K);
  std::vector<uint8_t> host(ggml_row_bytes(GgmlType::Q4_K, n_in) * n_out);
  Rng rng(3);
  k->fill_random(host.data(), n_in * n_out, rng, 0.02f);
  std::vector<uint8_t> packed(kernels::gpu_layout_bytes(GgmlType::Q4_K, n_in, n_out));
  kernels::repack_to_gpu_layout({host.data(), GgmlType::Q4_K, n_in, n_out, ggml_row_bytes(GgmlType::Q4_K, n_in)},
                                packed.data());
  DeviceBuffers mem;
  auto w = mem.alloc(packed.size());
  auto x = mem.alloc(n_in * sizeof(float));
  auto y = mem.alloc(n_out * sizeof(float));
  const kernels::WeightView v0{nullptr, GgmlType::Q4_K, n_in, n_out, 0, kernels::WeightLayout::kGpu};
  const size_t ws_bytes = cuda::workspace_bytes_for_gemv(v0, 1);
  auto ws = mem.alloc(ws_bytes);
  for (auto* r : {&w, &x, &y, &ws})
    if (!*r) return r->status();
  STRATA_TRY(cuda::copy_to_device(*w, packed.data(), packed.size(), nullptr));
  STRATA_TRY(cuda::memset_device(*x, 0, n_in * sizeof(float), nullptr));
  const auto v = kernels::gpu_layout_view(static_cast<const uint8_t*>(*w), GgmlType::Q4_K, n_in, n_out);
  constexpr int kCalls = 100;
  auto t = cuda::time_on_device(
      [&]() -> Status {
        for (int i = 0; i < kCalls; ++i)
          STRATA_TRY(cuda::gemv(v, static_cast<const float*>(*x), 1, static_cast<float*>(*y), {*ws, ws_bytes}, nullptr));
        return Status::ok();
      },
      a.iters, nullptr);
  if (!t) return t.status();
  // In a graph, as the engine runs them: quantiser + GEMV per call, and the GEMV alone (the
  // activations reused): the ramp a small matrix pays on top of its bytes.
  std::vector<double> per_call;
  for (bool reuse : {false, true}) {
    auto tg = time_as_graph(
        [&](cuda::Stream st) -> Status {
          for (int i = 0; i < kCalls; ++i)
            STRATA_TRY(cuda::gemv(v, static_cast<const float*>(*x), 1, static_cast<float*>(*y), {*ws, ws_bytes}, st,
                                  reuse && i > 0));
          return Status::ok();
        },
        a.iters);
    if (!tg) return tg.status();
    per_call.push_back(*tg / kCalls);
  }
  return GemvFloor{*t / kCalls, per_call[0], per_call[1]};
}

// One decode step's attention (1 query) over ctx keys of one KV type, with the flash-decoding
// kernel and with the tiled kernel it replaced (the "before" figure, same run, same ceiling).
Result<nlohmann::json> bench_attention(uint32_t ctx, GgmlType kv_type, const BenchKernelsArgs& a, double read_bw) {
  // gemma3-27b global layer: 32 query heads, 16 KV heads of 128.
  const cuda::AttentionShapeDev s{32, 16, 128, 0, 1.0f / 11.3137f};
  const size_t width = size_t(s.n_head_kv) * s.head_dim;
  const size_t kv_bytes = size_t(ctx) * kv::kv_row_bytes(kv_type, uint32_t(width));  // per K or V
  DeviceBuffers mem;
  auto k = mem.alloc(kv_bytes), v = mem.alloc(kv_bytes);
  auto q = mem.alloc(size_t(s.n_head) * s.head_dim * 4), out = mem.alloc(size_t(s.n_head) * s.head_dim * 4);
  auto pos = mem.alloc(sizeof(int32_t));
  for (auto* r : {&k, &v, &q, &out, &pos})
    if (!*r) return r->status();
  // Bytes 0x33 / 0x2c: finite values in every format (f16 0x3333 ~ 0.22 as value or scale).
  STRATA_TRY(cuda::memset_device(*k, 0x33, kv_bytes, nullptr));
  STRATA_TRY(cuda::memset_device(*v, 0x2c, kv_bytes, nullptr));
  STRATA_TRY(cuda::memset_device(*q, 0, size_t(s.n_head) * s.head_dim * 4, nullptr));
  const int32_t last = int32_t(ctx - 1);
  STRATA_TRY(cuda::copy_to_device(*pos, &last, sizeof(last), nullptr));
  const size_t ws_bytes = cuda::attention_workspace_bytes(1, s, ctx);
  void* ws = nullptr;
  if (ws_bytes) {
    auto w = mem.alloc(ws_bytes);
    if (!w) return w.status();
    ws = *w;
    STRATA_TRY(cuda::attention_workspace_clear({ws, ws_bytes}, nullptr));  // its counters start at zero
  }
  const cuda::KvStoreDev store{*k, *v, kv_type, kv_type, int64_t(ctx)};
  auto time = [&](cuda::AttentionKernel kernel) {
    return cuda::time_on_device(
        [&] {
          return cuda::attention(static_cast<const float*>(*q), static_cast<const int32_t*>(*pos), 1, store, s,
                                 static_cast<float*>(*out), {ws, ws_bytes}, nullptr, kernel);
        },
        a.iters, nullptr);
  };
  auto t = time(cuda::AttentionKernel::best);
  if (!t) return t.status();
  auto t_tiled = time(cuda::AttentionKernel::tiled);
  if (!t_tiled) return t_tiled.status();
  const double gbps = 2.0 * double(kv_bytes) / *t / 1e9, tiled_gbps = 2.0 * double(kv_bytes) / *t_tiled / 1e9;
  const std::string name = fmt::format("{} {}K", kv::kv_type_name(kv_type), ctx / 1024);
  return nlohmann::json{{"name", name},
                        {"context", ctx},
                        {"kv", kv::kv_type_name(kv_type)},
                        {"kv_bytes", 2 * kv_bytes},
                        {"us", *t * 1e6},
                        {"gb_s", gbps},
                        {"fraction_of_read", gbps * 1e9 / read_bw},
                        {"tiled_us", *t_tiled * 1e6},
                        {"tiled_fraction_of_read", tiled_gbps * 1e9 / read_bw}};
}

// One prefill chunk's attention: n_q queries at positions ctx - n_q .. ctx - 1 over ctx keys of one KV
// type (K and V alike), on the kernel attention() picks (tensor cores from 65 queries) and, when
// with_tiled, on the tiled f32 kernel it replaced (one timed pass: it takes ~0.1 s at 128K).
Result<nlohmann::json> bench_prefill_attention(uint32_t ctx, uint32_t n_q, GgmlType kv_type, bool with_tiled,
                                               const BenchKernelsArgs& a, double gemm_flops) {
  // gemma3-27b global layer: 32 query heads, 16 KV heads of 128.
  const cuda::AttentionShapeDev s{32, 16, 128, 0, 1.0f / 11.3137f};
  if (n_q > ctx) return Status::error("prefill attention: {} queries over {} keys", n_q, ctx);
  const size_t width = size_t(s.n_head_kv) * s.head_dim;
  const size_t kv_bytes = size_t(ctx) * kv::kv_row_bytes(kv_type, uint32_t(width));  // per K or V
  const size_t q_bytes = size_t(n_q) * s.n_head * s.head_dim * 4;
  DeviceBuffers mem;
  auto k = mem.alloc(kv_bytes), v = mem.alloc(kv_bytes);
  auto q = mem.alloc(q_bytes), out = mem.alloc(q_bytes);
  auto pos = mem.alloc(size_t(n_q) * sizeof(int32_t));
  for (auto* r : {&k, &v, &q, &out, &pos})
    if (!*r) return r->status();
  // Finite values in every format (as bench_attention); q = 0: the time does not depend on it.
  STRATA_TRY(cuda::memset_device(*k, 0x33, kv_bytes, nullptr));
  STRATA_TRY(cuda::memset_device(*v, 0x2c, kv_bytes, nullptr));
  STRATA_TRY(cuda::memset_device(*q, 0, q_bytes, nullptr));
  std::vector<int32_t> ph(n_q);
  for (uint32_t i = 0; i < n_q; ++i) ph[i] = int32_t(ctx - n_q + i);
  STRATA_TRY(cuda::copy_to_device(*pos, ph.data(), ph.size() * sizeof(int32_t), nullptr));
  const size_t ws_bytes = cuda::attention_workspace_bytes(n_q, s, ctx);
  void* ws = nullptr;
  if (ws_bytes) {
    auto w = mem.alloc(ws_bytes);
    if (!w) return w.status();
    ws = *w;
    STRATA_TRY(cuda::attention_workspace_clear({ws, ws_bytes}, nullptr));  // its counters start at zero
  }
  const cuda::KvStoreDev store{*k, *v, kv_type, kv_type, int64_t(ctx)};
  auto time = [&](cuda::AttentionKernel kernel, int iters) {
    return cuda::time_on_device(
        [&] {
          return cuda::attention(static_cast<const float*>(*q), static_cast<const int32_t*>(*pos), n_q, store, s,
                                 static_cast<float*>(*out), {ws, ws_bytes}, nullptr, kernel);
        },
        iters, nullptr);
  };
  // Visible (query, key) pairs: query i sees keys 0 .. ctx - n_q + i.
  const double pairs = double(n_q) * double(ctx - n_q) + 0.5 * double(n_q) * double(n_q + 1);
  const double flop = 4.0 * pairs * double(s.n_head) * double(s.head_dim);
  auto t = time(cuda::AttentionKernel::best, a.iters);
  if (!t) return t.status();
  const std::string name = fmt::format("{} {}K q{}", kv::kv_type_name(kv_type), ctx / 1024, n_q);
  nlohmann::json j{{"name", name},
                   {"context", ctx},
                   {"queries", n_q},
                   {"kv", kv::kv_type_name(kv_type)},
                   {"us", *t * 1e6},
                   {"tflops", flop / *t / 1e12},
                   {"fraction_of_bf16", flop / *t / gemm_flops}};
  if (with_tiled) {
    auto t_tiled = time(cuda::AttentionKernel::tiled, 1);
    if (!t_tiled) return t_tiled.status();
    j["tiled_us"] = *t_tiled * 1e6;
    j["tiled_tflops"] = flop / *t_tiled / 1e12;
    j["tiled_fraction_of_bf16"] = flop / *t_tiled / gemm_flops;
  }
  return j;
}

int run(BenchKernelsArgs& a) {
  if (Status s = a.compare.load("kernels"); !s) {
    log::error("{}", s.message());
    return 2;
  }
  const auto keys = shape_keys(a.shapes);
  if (!keys) {
    log::error("{}", keys.message());
    return 2;
  }
  std::string why;
  const auto devs = cuda::devices(&why);
  if (devs.empty()) {
    log::error("bench kernels needs a CUDA GPU ({})", why);
    return 1;
  }
  std::vector<GgmlType> types;
  std::stringstream ss(a.types);
  for (std::string t; std::getline(ss, t, ',');) {
    auto ty = ggml_type_from_name(t);
    if (!ty || !kernels::cpu::quant_kernels(*ty)) {
      log::error("--types: unknown or unsupported type '{}'", t);
      return 2;
    }
    types.push_back(*ty);
  }
  log::info("{}: measuring ceilings (device read, bf16 GEMM)...", devs[0].name);
  auto read = cuda::measure_read_bandwidth(size_t(2) * kGiB, 5);
  auto gemm = cuda::measure_gemm_flops(8192, 3);
  if (!read || !gemm) {
    log::error("{}", !read ? read.message() : gemm.message());
    return 1;
  }
  nlohmann::json j = {{"bench", "kernels"}, {"device", devs[0].name},
                      {"ceilings", {{"device_read_gb_s", *read / 1e9}, {"gemm_bf16_tflops", *gemm / 1e12}}}};
  fmt::print("ceilings: device read {:.0f} GB/s, bf16 GEMM {:.0f} TFLOP/s\n", *read / 1e9, *gemm / 1e12);
  fmt::print("{:<6} {:<20} {:>9} {:>8} {:>9} {:>9} {:>8} {:>9} {:>10} {:>8} | {:>9} {:>8} {:>6} {:>6} {:>6} {:>6} {:>6} |"
             " {:>8} {:>6} {:>6} {:>6} | {:>6} {:>6} {:>6} {:>6} | {:>6} {:>6}\n",
             "type", "shape", "gemv1 us", "GB/s", "of read", "(f32 x)", "b8/b1", "gemm TF", "of bf16", "buffers",
             "gpu1 us", "of read", "b2/b1", "b4/b1", "b8/b1", "b16/b1", "b64/b1", "graph1", "g8/g1", "g16/g1", "g64/g1",
             "dp4a1", "mma1", "m8/d1", "m16/d1", "pdl1", "alone1");
  nlohmann::json rows = nlohmann::json::array();
  for (GgmlType t : types)
    for (const auto& sh : kShapes) {
      if (a.quick && &sh != &kShapes[1]) continue;
      if (std::find(keys->begin(), keys->end(), sh.key) == keys->end()) continue;
      auto r = bench_gemv(t, sh, a, *read, *gemm);
      if (!r) {
        log::error("{} {}: {}", ggml_type_info(t).name, sh.name, r.message());
        return 1;
      }
      const auto& x = *r;
      fmt::print("{:<6} {:<20} {:>9.1f} {:>8.0f} {:>8.0f}% {:>8.0f}% {:>8.2f} {:>9} {:>10} {:>8}",
                 ggml_type_info(t).name, sh.name, x["gemv1_us"].get<double>(), x["gemv1_gb_s"].get<double>(),
                 100 * x["gemv1_fraction_of_read"].get<double>(), 100 * x["gemv1_f32act_fraction_of_read"].get<double>(),
                 x["gemv8_over_gemv1"].get<double>(),
                 x.contains("gemm2048_tflops") ? fmt::format("{:.0f}", x["gemm2048_tflops"].get<double>()) : "-",
                 x.contains("gemm2048_fraction_of_bf16")
                     ? fmt::format("{:.0f}%", 100 * x["gemm2048_fraction_of_bf16"].get<double>())
                     : "-",
                 x["buffers"].get<int>());
      if (x.contains("gpu_gemv1_us")) {
        const double g1 = x["graph_gpu_gemv1_us"].get<double>();
        const double d1 = x["graph_dp4a_gemv1_us"].get<double>();
        fmt::print(" | {:>9.1f} {:>7.0f}% {:>6.2f} {:>6.2f} {:>6.2f} {:>6.2f} {:>6.2f} | {:>7.0f}% {:>6.2f} {:>6.2f} {:>6.2f} |"
                   " {:>5.0f}% {:>5.0f}% {:>6.2f} {:>6.2f} | {:>5.0f}% {:>5.0f}%\n",
                   x["gpu_gemv1_us"].get<double>(), 100 * x["gpu_gemv1_fraction_of_read"].get<double>(),
                   x["gpu_gemv2_over_gemv1"].get<double>(), x["gpu_gemv4_over_gemv1"].get<double>(),
                   x["gpu_gemv8_over_gemv1"].get<double>(), x["gpu_gemv16_over_gemv1"].get<double>(),
                   x["gpu_gemv64_over_gemv1"].get<double>(),
                   100 * x["graph_gpu_gemv1_fraction_of_read"].get<double>(), x["graph_gpu_gemv8_us"].get<double>() / g1,
                   x["graph_gpu_gemv16_us"].get<double>() / g1, x["graph_gpu_gemv64_us"].get<double>() / g1,
                   100 * x["graph_dp4a_gemv1_fraction_of_read"].get<double>(),
                   100 * x["graph_mma_gemv1_fraction_of_read"].get<double>(), x["graph_mma_gemv8_us"].get<double>() / d1,
                   x["graph_mma_gemv16_us"].get<double>() / d1,
                   100 * x["graph_pdl_gemv1_fraction_of_read"].get<double>(),
                   100 * x["graph_alone_gemv1_fraction_of_read"].get<double>());
      } else {
        fmt::print(" | (GGUF layout only)\n");
      }
      rows.push_back(x);
    }
  j["matmul"] = rows;
  // The fixed cost of one gemv call (activation quantiser + GEMV launch, back to back, no graph):
  // a 256 x 8 q4_K matrix in the GPU layout, whose bytes take ~0 time. Small matrices (qkv) pay it.
  if (auto floor = bench_gemv_floor(a); floor) {
    j["gemv_call_floor_us"] = floor->eager_s * 1e6;
    j["gemv_graph_floor_us"] = floor->graph_s * 1e6;
    j["gemv_graph_floor_gemv_only_us"] = floor->graph_gemv_only_s * 1e6;
    fmt::print("gemv call floor (1 column, 256x8 q4_K, GPU layout): {:.1f} us eager; in a graph {:.2f} us "
               "(quantiser + GEMV), {:.2f} us (GEMV alone)\n",
               floor->eager_s * 1e6, floor->graph_s * 1e6, floor->graph_gemv_only_s * 1e6);
  } else {
    log::error("gemv floor: {}", floor.message());
    return 1;
  }
  // Decode attention: every KV type at every context (the M11 target: >= 60% of read at 32K and 128K).
  std::vector<GgmlType> kv_types;
  std::stringstream ks(a.kv);
  for (std::string t; std::getline(ks, t, ',');) {
    const auto kt = kv::kv_type_from_name(t);
    if (!kt || *kt == GgmlType::F32) {
      log::error("--kv: '{}' is not f16, q8 or q4", t);
      return 2;
    }
    kv_types.push_back(*kt);
  }
  const std::vector<uint32_t> ctxs = a.quick ? std::vector<uint32_t>{4096} : a.ctx;
  fmt::print("decode attention (1 query, 32 heads, 16 KV heads x 128):\n{:<10} {:>8} {:>10} {:>8} {:>9} | {:>10} {:>9}\n",
             "kv", "keys", "us", "GB/s", "of read", "tiled us", "of read");
  nlohmann::json att_rows = nlohmann::json::array();
  for (const uint32_t ctx : ctxs)
    for (const GgmlType kt : kv_types) {
      auto att = bench_attention(ctx, kt, a, *read);
      if (!att) {
        log::error("attention: {}", att.message());
        return 1;
      }
      const auto& x = *att;
      fmt::print("{:<10} {:>8} {:>10.1f} {:>8.0f} {:>8.0f}% | {:>10.1f} {:>8.0f}%\n", x["kv"].get<std::string>(), ctx,
                 x["us"].get<double>(), x["gb_s"].get<double>(), 100 * x["fraction_of_read"].get<double>(),
                 x["tiled_us"].get<double>(), 100 * x["tiled_fraction_of_read"].get<double>());
      att_rows.push_back(x);
    }
  j["decode_attention"] = att_rows;
  // Prefill attention: a chunk ending at each context (global layers at 128K dominate a long prefill).
  fmt::print("prefill attention (chunk ending at the context, 32 heads, 16 KV heads x 128; TFLOP/s over the bf16 GEMM):\n"
             "{:<10} {:>8} {:>8} {:>10} {:>8} {:>8} | {:>11} {:>8} {:>8}\n",
             "kv", "keys", "queries", "us", "TFLOP/s", "of bf16", "tiled us", "TFLOP/s", "of bf16");
  nlohmann::json pre_rows = nlohmann::json::array();
  const std::vector<uint32_t> pre_q = a.quick ? std::vector<uint32_t>{512} : a.prefill_q;
  for (const uint32_t ctx : ctxs)
    for (const GgmlType kt : kv_types)
      for (const uint32_t nq : pre_q) {
        if (nq > ctx) continue;
        auto att = bench_prefill_attention(ctx, nq, kt, nq == pre_q.front(), a, *gemm);
        if (!att) {
          log::error("prefill attention: {}", att.message());
          return 1;
        }
        const auto& x = *att;
        fmt::print("{:<10} {:>8} {:>8} {:>10.0f} {:>8.1f} {:>7.1f}%", x["kv"].get<std::string>(), ctx, nq,
                   x["us"].get<double>(), x["tflops"].get<double>(), 100 * x["fraction_of_bf16"].get<double>());
        if (x.contains("tiled_us"))
          fmt::print(" | {:>11.0f} {:>8.1f} {:>7.1f}%\n", x["tiled_us"].get<double>(), x["tiled_tflops"].get<double>(),
                     100 * x["tiled_fraction_of_bf16"].get<double>());
        else
          fmt::print(" | {:>11} {:>8} {:>8}\n", "-", "-", "-");
        pre_rows.push_back(x);
      }
  j["prefill_attention"] = pre_rows;
  return finish_bench(j, a.json_out, a.compare);
}

}  // namespace

std::function<int()> add_bench_kernels(CLI::App* bench) {
  auto a = std::make_shared<BenchKernelsArgs>();
  auto* sub = bench->add_subcommand("kernels", "CUDA GEMV/GEMM/attention on the 27B shapes vs the device read and "
                                               "bf16 GEMM ceilings measured in the same run");
  sub->add_option("--types", a->types, "Weight types, comma-separated")->capture_default_str();
  sub->add_option("--kv", a->kv, "KV types of the decode and prefill attention figures, comma-separated: f16, q8, q4")
      ->capture_default_str();
  sub->add_option("--prefill-queries", a->prefill_q,
                  "Queries per chunk of the prefill attention figures, comma-separated (the tiled kernel runs "
                  "for the first)")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 16));
  sub->add_option("--ctx", a->ctx, "Keys of the decode and prefill attention figures, comma-separated")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::Range(16, 1 << 20));
  sub->add_option("--iters", a->iters, "Timed passes (the best counts)")->capture_default_str()->check(CLI::Range(1, 100));
  sub->add_option("--l2-cover", a->l2_cover, "Bytes of distinct weight buffers each GEMV pass walks (>= 4x L2)")
      ->capture_default_str();
  sub->add_flag("--quick", a->quick, "One shape per type and a 4K context (smoke run)");
  sub->add_option("--shapes", a->shapes, "GEMV shapes of the 27B, comma-separated: qkv, ffn_up, ffn_down, head (one "
                                         "alone, e.g. to profile it)")
      ->capture_default_str();
  sub->add_option("--json", a->json_out, "Write the results as JSON to this file");
  a->compare.add_to(sub);
  return [a, sub]() -> int { return sub->parsed() ? run(*a) : -1; };
}

}  // namespace strata::cli
