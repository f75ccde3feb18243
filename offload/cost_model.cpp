#include "offload/cost_model.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "core/units.h"

namespace strata::offload {
namespace {

constexpr double kGpuLaunchS = 15e-6;       // kernel launches + event waits per block
// Per piece of host work in a step (a host function between a copy down and a copy up on the
// compute stream, runtime/host_compute.h): a cpu-tier FFN block is one (the whole block on the
// host), an attention block four (Q, K and V after one copy down, then the output matrix: its
// attention runs where its KV is), the head one.
constexpr double kCpuRoundTripS = 20e-6;
double cpu_round_trips(model::Block b) { return b == model::Block::attention ? 4.0 : 1.0; }
constexpr double kPrefillHostKvTile = 16;   // queries per pass over host-held KV in prefill
// Fractions of the profile's GEMM ceiling (a cuBLAS bf16 GEMM) the engine's own paths reach, as
// measured (H200, `strata bench decode` / `bench kernels`, 2026-12-02): tensor-core flash attention
// over f16 / q4 KV 20-24% (q8 7%), and a prefill chunk's matmuls (weights dequantised to f16
// tiles, then cuBLAS) by the chunk's token count, gemm_efficiency. Without them the model predicted
// 13001 tok/s for a 128K prompt the engine prefills at 4352. Apply to every GPU until a profile
// measures its own.
constexpr double kAttentionEfficiency = 0.21;
// The share of the shorter of a streamed prefill chunk's copies and compute that does not overlap
// the other: chunk by chunk the 27B at 12 GiB took 139 ms per 512-token chunk at 128K (compute
// ~110 ms, copies 90 ms) and 103 ms at 32K (~91 ms, 44 ms) where max() said 110 and 91; 0.3 fits
// both (H200, `strata stress`, 2026-12-02). Without it the planner saw a compute-bound prefill and
// reserved no layer-major group, which then ran 20% faster.
constexpr double kPrefillOverlapLoss = 0.3;

// Every chunk dequantises each matrix once and cuBLAS runs wider at more columns: the resident
// 27B's matmuls reached 40% of the bf16 ceiling at 512-token chunks and 64% at 4096 (a 4K prompt,
// per-op trace, 2026-12-02); between them log-linear, beyond them flat.
double gemm_efficiency(uint32_t chunk) {
  constexpr double kAt512 = 0.40, kAt4096 = 0.64;
  const double octaves = std::clamp(std::log2(std::max<double>(chunk, 1) / 512.0), 0.0, 3.0);
  return kAt512 + (kAt4096 - kAt512) * octaves / 3.0;
}

// The decode GEMV's fraction of device read per weight type (the engine's path: GPU layout, int8
// activations, dp4a, timed inside a CUDA graph as the engine runs it): `strata bench kernels` on
// the H200, 2026-12-02, mean of the 27B's ffn up and ffn down shapes. Types not measured take
// kGemvReadOther (an assumption). A consumer card's fractions are assumed the same (its lower
// bandwidth makes the kernels more memory-bound, so this errs slow).
double gemv_read_fraction(GgmlType t) {
  switch (t) {
    case GgmlType::Q3_K: return 0.50;
    case GgmlType::Q4_K: return 0.59;
    case GgmlType::Q5_K: return 0.63;
    case GgmlType::Q6_K: return 0.66;
    case GgmlType::Q8_0: return 0.77;
    // The i-quants with a GPU layout (kernels/gpu_layout.h): the same bench in a graph, H200,
    // 2026-12-03, ffn up / down: iq3_xxs 32 / 33%, iq3_s 38 / 37%, iq4_xs 62 / 58% (their decode,
    // grid lookups and signs, makes them instruction-bound at HBM rates); iq4_nl (q8_0's 32-element
    // tiles) assumed like iq4_xs. The grid types without one (GGUF layout) measured 25% as
    // iq3_xxs did in that layout, and are assumed so.
    case GgmlType::IQ3_XXS: return 0.32;
    case GgmlType::IQ3_S: return 0.38;
    case GgmlType::IQ4_XS: case GgmlType::IQ4_NL: return 0.60;
    case GgmlType::IQ2_XXS: case GgmlType::IQ2_XS: case GgmlType::IQ2_S: case GgmlType::IQ1_S:
    case GgmlType::IQ1_M: return 0.25;
    default: return 0.5;  // kGemvReadOther: f16/bf16/f32 and the legacy types, not measured
  }
}
double gbps_time(double bytes, double gbps) { return gbps > 0 ? bytes / (gbps * 1e9) : (bytes > 0 ? 1e9 : 0); }

}  // namespace

bool spread_streamed_default() {
  static const bool on = [] {
    const char* e = std::getenv("STRATA_PLAN_SPREAD");
    return !(e && std::string(e) == "0");
  }();
  return on;
}

bool shared_ring_default() {
  static const bool on = [] {
    const char* e = std::getenv("STRATA_SHARED_RING");
    return !(e && std::string(e) == "0");
  }();
  return on;
}

// The time of a b-column GEMV over the one-column time: `strata bench kernels` (GPU layout, in a
// CUDA graph as the engine runs it: dp4a for 1-2 columns, the int8 MMA kernel from 3), summed over
// the 27B's four shapes for q3_K, q4_K, q5_K, q6_K and q8_0, on an H100, 2026-12-06. Linear between
// the measured counts and past 64 (a wider call is more MMA passes). The dp4a-only kernels of
// 2026-12-02 cost 0.35 of a column per extra column; the MMA kernel reads each weight once for up to
// 8 columns, so a verify pass of 8 rows now costs ~1.4 single steps of GEMV, not 3.5. The 16-column
// entry (2.70 then) scaled by 0.80, the one-CTA 16-column kernel's gain over the four q4_K shapes
// summed (H100, 2026-12-07, one run; gemv_gpu_launch.cuh gemv_mma16_one_cta).
double gemv_column_cost(uint32_t b) {
  static constexpr std::pair<double, double> kMeasured[] = {{1, 1.0},   {2, 1.14},  {4, 1.30}, {8, 1.39},
                                                            {16, 2.16}, {32, 3.99}, {64, 8.10}};
  const double x = std::max<double>(b, 1);
  for (size_t i = 1; i < std::size(kMeasured); ++i) {
    const auto [x0, y0] = kMeasured[i - 1];
    const auto [x1, y1] = kMeasured[i];
    if (x <= x1) return y0 + (y1 - y0) * (x - x0) / (x1 - x0);
  }
  const auto [xl, yl] = kMeasured[std::size(kMeasured) - 1];
  return yl * x / xl;
}


std::string RunShape::kv_name() const {
  if (kv_v_dtype() == kv) return kv_dtype_name(kv);
  return fmt::format("k {} / v {}", kv_dtype_name(kv), kv_dtype_name(kv_v_dtype()));
}


double SweepCost::slowest_s() const { return std::max({h2d_s, disk_s, gpu_s + cpu_s, host_s}); }

double SweepCost::total_s() const {
  return slowest_s() + kCpuOverlapLoss * std::min(std::max(h2d_s, disk_s), cpu_s);
}

std::string SweepCost::bottleneck(const HardwareProfile& p) const {
  // The slowest resource, and what the partial overlap of copies and CPU blocks adds to it.
  const double t = slowest_s();
  if (t <= 0) return "nothing";
  const double loss = total_s() - t;
  const std::string tail =
      loss > 0 ? fmt::format(", +{:.1f} ms where copies and CPU blocks do not overlap", loss * 1e3) : std::string();
  if (h2d_s >= t && h2d_bytes > 0)
    return fmt::format("PCIe: {:.2f} GB per step at {:.1f} GB/s{}", h2d_bytes / 1e9, h2d_bytes / 1e9 / h2d_s, tail);
  if (disk_s >= t && disk_bytes > 0)
    return fmt::format("NVMe: {:.2f} GB per step at {:.1f} GB/s{}", disk_bytes / 1e9, p.nvme_gbps(), tail);
  if (host_s >= t && cpu_bytes > 0)
    return fmt::format("host RAM: {:.2f} GB per step read by PCIe copies and CPU blocks together at {:.1f} GB/s{}",
                       (h2d_bytes + cpu_bytes) / 1e9, p.host_gbps(), tail);
  if (cpu_s > gpu_s)
    return fmt::format("CPU: {:.2f} GB of weights/KV per step ({:.1f} ms CPU vs {:.1f} ms GPU){}", cpu_bytes / 1e9,
                       cpu_s * 1e3, gpu_s * 1e3, tail);
  return fmt::format("GPU compute/VRAM reads: {:.2f} ms per step at {:.0f} GB/s{}", gpu_s * 1e3,
                     p.device_read_gbps.value, tail);
}

uint64_t scratch_bytes(const ModelBlocks& m, const RunShape& r) {
  const uint64_t chunk = std::min<uint64_t>(r.prefill_chunk, std::max<uint64_t>(1, r.prompt_tokens()));
  const uint64_t per_tok = 3ull * m.n_embd + 2ull * m.n_ff + uint64_t(m.n_head) * m.head_dim +
                           2ull * m.n_head_kv * m.head_dim;
  const uint64_t logit_rows = std::min<uint64_t>(kLogitRows, std::max<uint64_t>(chunk, r.max_draft() + 1));
  // activations + logits + dequantised GEMM tile and the f16 copy of its input + cuBLAS + slack
  // for attention split partials and small buffers.
  return 4 * chunk * per_tok + 4ull * m.n_vocab * logit_rows + kGemmTileBytes +
         2 * chunk * std::max(m.n_embd, m.n_ff) + kCublasScratchBytes + 32 * kMiB;
}

bool layer_major_prefill(const Placement& pl) {
  return pl.any_streamed() && !pl.any(Tier::cpu) && !pl.any_kv_host();
}

uint64_t prefill_chunks(const RunShape& r) {
  const uint64_t prompt = std::max<uint64_t>(1, r.prompt_tokens());
  const uint64_t chunk = std::min<uint64_t>(std::max<uint32_t>(1, r.prefill_chunk), prompt);
  return (prompt + chunk - 1) / chunk;
}

uint64_t prefill_group_bytes(const ModelBlocks& m, const RunShape& r, uint32_t g) {
  // The engine sizes it for whole chunks of ubatch (= prefill_chunk) rows.
  return g <= 1 ? 0 : uint64_t(g) * r.prefill_chunk * m.n_embd * sizeof(float);
}

SweepCost sweep_cost(const ModelBlocks& m, const HardwareProfile& p, const Placement& pl, const RunShape& r,
                     uint32_t l0, uint32_t l1, bool head, uint32_t batch, uint64_t pos, bool prefill) {
  SweepCost c;
  const double dev = p.device_read_gbps.value, ceiling = p.gpu_gemm_tflops.value * 1e12;
  const double gemm = ceiling * gemm_efficiency(batch), att_rate = ceiling * kAttentionEfficiency;
  auto block = [&](const WeightBlock& b, Tier t) {
    const double flops = 2.0 * double(b.params) * batch;
    const bool to_gpu_for_prefill = prefill && p.has_gpu();  // no GPU: prefill stays on the CPU
    const bool on_gpu = t != Tier::cpu || to_gpu_for_prefill;
    if (t == Tier::stream || t == Tier::disk || (t == Tier::cpu && to_gpu_for_prefill)) {
      c.h2d_s += gbps_time(double(b.bytes), p.h2d_gbps(b.bytes));
      c.h2d_bytes += b.bytes;
    }
    if (t == Tier::disk) {
      c.disk_s += gbps_time(double(b.bytes), p.nvme_gbps());
      c.disk_bytes += b.bytes;
    }
    if (on_gpu) {
      // Decode-sized calls (<= 16 rows) run the GEMV; prefill chunks the GEMM (compute-bound).
      const double read_s = gbps_time(double(b.bytes), dev * gemv_read_fraction(b.main_type())) *
                            (prefill ? 1.0 : gemv_column_cost(batch));
      c.gpu_s += std::max(read_s, gemm > 0 ? flops / gemm : 0.0) + kGpuLaunchS;
    } else {
      const double q8 = r.cpu_int8 ? p.cpu_gemv_q8_gbps(b.main_type(), batch) : 0.0;
      c.cpu_s += (q8 > 0 ? gbps_time(double(b.bytes), q8)
                         : batch * gbps_time(double(b.bytes), p.cpu_gemv_gbps(b.main_type()))) +
                 kCpuRoundTripS * cpu_round_trips(b.kind);
      c.cpu_bytes += b.bytes;
    }
  };
  for (uint32_t il = l0; il < l1; ++il) {
    block(m.attention[il], pl.attention[il]);
    // Attention over this layer's KV.
    const uint64_t attended = m.swa[il] ? std::min<uint64_t>(pos, m.window[il]) : pos;
    const double kv_bytes = double(attended) * m.kv_bytes_per_token(r.kv, r.kv_v_dtype());
    const double att_flops = 4.0 * m.n_head * m.head_dim * double(attended) * batch;
    if (pl.kv[il] == KvTier::gpu) {
      c.gpu_s += gbps_time(kv_bytes, dev) + (att_rate > 0 ? att_flops / att_rate : 0.0);
    } else {
      const double passes = prefill ? std::ceil(batch / kPrefillHostKvTile) : double(batch);
      c.cpu_s += passes * gbps_time(kv_bytes, p.host_gbps()) + kCpuRoundTripS;
      c.cpu_bytes += uint64_t(passes * kv_bytes);
    }
    block(m.ffn[il], pl.ffn[il]);
  }
  if (head) block(m.head, pl.head);
  if (c.cpu_bytes > 0) c.host_s = gbps_time(double(c.h2d_bytes + c.cpu_bytes), p.host_gbps());
  return c;
}

Prediction predict(const ModelBlocks& m, const HardwareProfile& p, const Placement& pl, const RunShape& r,
                   uint32_t prefill_group) {
  Prediction out;
  const uint64_t pos = r.decode_pos();
  const uint32_t rows = std::max(1u, r.decode_rows);
  out.step = sweep_cost(m, p, pl, r, 0, m.n_layer, true, rows, pos, false);
  const double step_s = out.step.total_s();
  out.decode_tps = step_s > 0 ? double(rows) / step_s : 0;
  out.spec_tps = out.decode_tps;
  if (r.speculative()) {
    const uint32_t d = std::min(r.draft_depth, m.n_layer);
    const uint32_t k = r.draft_len;
    out.draft = sweep_cost(m, p, pl, r, 0, d, true, 1, pos, false);
    out.verify = sweep_cost(m, p, pl, r, d, m.n_layer, true, k + 1, pos, false);
    const double a = std::clamp(r.acceptance, 0.0, 0.999999);
    const double tokens = (1.0 - std::pow(a, double(k + 1))) / (1.0 - a);
    const double cycle = k * out.draft.total_s() + out.verify.total_s();
    // Speculation is used only where it pays (the engine adapts k; k = 0 is plain decoding).
    if (cycle > 0) out.spec_tps = std::max(out.decode_tps, tokens / cycle);
  }
  const uint64_t prompt = r.prompt_tokens();
  const uint32_t chunk = uint32_t(std::min<uint64_t>(r.prefill_chunk, std::max<uint64_t>(1, prompt)));
  const uint64_t n_chunks = (prompt + chunk - 1) / chunk;
  out.prefill_chunk = sweep_cost(m, p, pl, r, 0, m.n_layer, false, chunk, prompt / 2, true);
  // A group of g chunks copies each streamed block once and computes g chunks (layer-major).
  const SweepCost& c = out.prefill_chunk;
  const uint64_t g = std::max<uint64_t>(1, std::min<uint64_t>(prefill_group, n_chunks));  // an empty prompt: 0 chunks
  // Copies and compute overlap, but not fully: blocks differ in bytes and FLOPs, and the ring holds
  // only a few, so a share of the shorter side shows (kPrefillOverlapLoss).
  auto group_s = [&](uint64_t k) {
    if (k == 0) return 0.0;
    const double copy = std::max(c.h2d_s, c.disk_s), compute = double(k) * (c.gpu_s + c.cpu_s);
    return std::max(copy, compute) + kPrefillOverlapLoss * std::min(copy, compute);
  };
  out.prefill_group = uint32_t(g);
  const double prefill_s = double(n_chunks / g) * group_s(g) + group_s(n_chunks % g);
  out.prefill_tps = prefill_s > 0 ? double(prompt) / prefill_s : 0;
  out.ttft_s = prefill_s + step_s;
  return out;
}

}  // namespace strata::offload
