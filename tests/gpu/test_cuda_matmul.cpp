// CUDA matmul on quantised weights (gemv, gemm, dequantize_rows) against the CPU reference
// (kernels::cpu::matmul_dot, the exact-weights f32 dots), for every type with CPU kernels and
// every shape class, on fresh random data; the same for weights repacked into the GPU layout
// (kernels/gpu_layout.h: gemv at 1..16, 32 and 64 columns on the MMA kernel, 1..16 on the dp4a kernel, columns independent of their count, gemm, and
// dequantize_rows / get_rows bit for bit). Outputs are poisoned with NaN before each launch.
// Skips without a GPU. Also prints (WARN, informational) the 1-column GEMV bandwidth on a
// 5376 x 21504 matrix next to the measured device-read ceiling.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <limits>
#include <vector>

#include "core/ggml_type.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/quant_kernels.h"
#include "kernels/cuda/cuda_api.h"
#include "kernels/cuda/gemv_tuning.h"
#include "kernels/cuda/device_info.h"
#include "kernels/cuda/read_probe.h"
#include "kernels/gpu_layout.h"
#include "test_util.h"

namespace {

using namespace strata;
namespace kc = strata::kernels::cuda;

const GgmlType kTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q4_0, GgmlType::Q4_1,
                           GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q2_K, GgmlType::Q3_K,
                           GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};

bool have_gpu() {
  std::string why;
  if (!kc::devices(&why).empty()) return true;
  WARN("skipped: no CUDA device (" << why << ")");
  return false;
}

// Device buffer owned by the test.
struct DevBuf {
  void* p = nullptr;
  size_t bytes = 0;
  explicit DevBuf(size_t n) : bytes(n) {
    auto r = kc::device_alloc(n);
    REQUIRE(r.is_ok());
    p = *r;
  }
  ~DevBuf() { kc::device_free(p); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  template <typename T>
  T* as() const { return static_cast<T*>(p); }
};

void check_ok(const Status& s) {
  INFO((s.is_ok() ? std::string("ok") : s.message()));
  REQUIRE(s.is_ok());
}

// Host weights: even rows straight from fill_random, odd rows quantised from normal data.
struct HostWeights {
  GgmlType type;
  int64_t n_in, n_out;
  uint64_t row_bytes;
  std::vector<uint8_t> bytes;
  std::vector<float> deq;  // exact dequantised values (CPU), (n_out, n_in)
  kernels::WeightView view() const { return {bytes.data(), type, n_in, n_out, row_bytes}; }
};

HostWeights make_weights(GgmlType t, int64_t n_in, int64_t n_out, Rng& rng) {
  const auto* qk = kernels::cpu::quant_kernels(t);
  REQUIRE(qk != nullptr);
  HostWeights w{t, n_in, n_out, ggml_row_bytes(t, uint64_t(n_in)), {}, {}};
  w.bytes.resize(w.row_bytes * n_out);
  w.deq.resize(size_t(n_in * n_out));
  for (int64_t r = 0; r < n_out; ++r) {
    uint8_t* row = w.bytes.data() + r * w.row_bytes;
    if (r % 2 == 0) {
      qk->fill_random(row, n_in, rng, 1.0f);
    } else {
      const auto v = test::random_normal(size_t(n_in), rng);
      qk->quantize(v.data(), row, n_in);
    }
    qk->dequantize(row, w.deq.data() + r * n_in, n_in);
  }
  return w;
}

// Tolerances (per output element), with S = sum_i |w_i x_i|:
// - gemv: f32 accumulation in a different order than the CPU, and quantised pieces of 8 evaluated
//   as scale * sum(q x) - offset * sum(x). Rounding errors add like a random walk, so the error is
//   ~sqrt(n) eps S; we allow 8 sqrt(n + 64) eps S', S' = S + sum over pieces of M_p sum_p |x|, M_p the
//   largest |w| of the piece plus its range (bounds |offset| and |scale q|). The worst-case n eps S
//   would be too loose to see one mis-decoded piece in a 5376-wide row.
// - gemm: W and x are rounded to f16 (relative 2^-11 each), so each product is off by <= ~2^-10
//   relative: |err| <= 2^-10 S (rigorous), plus the f32 term above.
struct RefStats {
  std::vector<double> s, s_piece;  // per (col, row)
};

RefStats ref_stats(const HostWeights& w, const std::vector<float>& x, int n_cols) {
  RefStats st;
  st.s.assign(size_t(n_cols * w.n_out), 0.0);
  st.s_piece.assign(size_t(n_cols * w.n_out), 0.0);
  for (int c = 0; c < n_cols; ++c) {
    for (int64_t r = 0; r < w.n_out; ++r) {
      const float* wr = w.deq.data() + r * w.n_in;
      const float* xc = x.data() + c * w.n_in;
      double s = 0, sp = 0;
      for (int64_t p = 0; p < w.n_in; p += 8) {
        const int64_t e = std::min<int64_t>(p + 8, w.n_in);
        double mx = 0, lo = 1e300, hi = -1e300, sx = 0;
        for (int64_t i = p; i < e; ++i) {
          s += std::fabs(double(wr[i]) * xc[i]);
          mx = std::max(mx, std::fabs(double(wr[i])));
          lo = std::min(lo, double(wr[i]));
          hi = std::max(hi, double(wr[i]));
          sx += std::fabs(double(xc[i]));
        }
        sp += (mx + (hi - lo)) * sx;
      }
      st.s[c * w.n_out + r] = s;
      st.s_piece[c * w.n_out + r] = s + sp;
    }
  }
  return st;
}

// The int8 activations the q8 GEMV computes with (gemv_q8.cuh), reproduced bit for bit: per 32
// elements d = amax / 127, q = round-half-even(x / d), value q * d.
std::vector<float> act_q8_values(const std::vector<float>& x) {
  std::vector<float> out(x.size());
  for (size_t b = 0; b + 32 <= x.size(); b += 32) {
    float amax = 0;
    for (size_t i = b; i < b + 32; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float d = amax / 127.0f;
    for (size_t i = b; i < b + 32; ++i) out[i] = d > 0 ? float(int(std::nearbyint(x[i] / d))) * d : 0.0f;
  }
  return out;
}

// Runs gemv (n_cols <= 16, GPU layout 64) or gemm on the device and compares with matmul_dot. q8: the gemv gets a
// workspace, so quantised types take the int8-activation path, compared against the reference on
// the same int8-rounded activations.
// gpu: the weights are repacked (kernels/gpu_layout.h) and the kernels take the GPU-layout view
// (implies q8: that layout has only the int8-activation GEMV).
void check_matmul(GgmlType t, int64_t n_in, int64_t n_out, int n_cols, Rng& rng, bool q8 = false, bool gpu = false) {
  const auto name = ggml_type_info(t).name;
  q8 = q8 || gpu;
  INFO("type " << name << " n_in " << n_in << " n_out " << n_out << " n_cols " << n_cols << (q8 ? " int8 x" : "")
               << (gpu ? " gpu layout" : ""));
  const HostWeights w = make_weights(t, n_in, n_out, rng);
  const auto x_in = test::random_normal(size_t(n_cols * n_in), rng);
  const int max_cols = gpu ? kc::kMaxGpuGemvCols : kc::kMaxGemvCols;
  const bool q8_path = q8 && n_cols <= max_cols && kc::workspace_bytes_for_gemv(w.view(), n_cols) > 0;
  const auto x = q8_path ? act_q8_values(x_in) : x_in;  // what the kernel effectively multiplies
  std::vector<float> ref(size_t(n_cols * n_out));
  kernels::cpu::matmul_dot(w.view(), x.data(), n_cols, ref.data());

  std::vector<uint8_t> packed;
  if (gpu) {
    packed.resize(kernels::gpu_layout_bytes(t, n_in, n_out));
    REQUIRE(!packed.empty());
    kernels::repack_to_gpu_layout(w.view(), packed.data());
  }
  const std::vector<uint8_t>& wbytes = gpu ? packed : w.bytes;
  DevBuf dw(wbytes.size()), dx(x.size() * 4), dy(ref.size() * 4);
  check_ok(kc::copy_to_device(dw.p, wbytes.data(), wbytes.size(), nullptr));
  check_ok(kc::copy_to_device(dx.p, x_in.data(), x_in.size() * 4, nullptr));
  const std::vector<float> poison(ref.size(), std::numeric_limits<float>::quiet_NaN());
  check_ok(kc::copy_to_device(dy.p, poison.data(), poison.size() * 4, nullptr));
  kernels::WeightView dv = gpu ? kernels::gpu_layout_view(dw.as<uint8_t>(), t, n_in, n_out) : w.view();
  dv.data = dw.as<uint8_t>();
  const bool is_gemv = n_cols <= max_cols;
  size_t ws_bytes = is_gemv ? (q8 ? kc::workspace_bytes_for_gemv(dv, n_cols) : 0) : kc::workspace_bytes_for_gemm(dv, n_cols);
  DevBuf ws(std::max<size_t>(ws_bytes, 256));
  // matmul picks the GEMM above 16 columns; the GPU layout's GEMV to 64 is called directly.
  if (is_gemv && n_cols > kc::kMaxGemvCols)
    check_ok(kc::gemv(dv, dx.as<float>(), n_cols, dy.as<float>(), kc::Workspace{ws.p, ws_bytes}, nullptr));
  else
    check_ok(kc::matmul(dv, dx.as<float>(), n_cols, dy.as<float>(), kc::Workspace{ws.p, ws_bytes}, nullptr));
  check_ok(kc::synchronize(nullptr));
  std::vector<float> y(ref.size());
  check_ok(kc::copy_to_host(y.data(), dy.p, y.size() * 4, nullptr));
  check_ok(kc::synchronize(nullptr));

  const RefStats st = ref_stats(w, x, n_cols);
  const double eps = std::numeric_limits<float>::epsilon();
  int bad = 0;
  double worst_ratio = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    const double tol = is_gemv ? 8.0 * std::sqrt(double(n_in + 64)) * eps * st.s_piece[i] + 1e-30
                               : std::ldexp(1.0, -10) * st.s[i] * 1.01 + 8.0 * std::sqrt(double(n_in + 64)) * eps * st.s[i] + 1e-30;
    const double err = std::fabs(double(y[i]) - double(ref[i]));
    if (!(err <= tol)) {  // NaN fails
      if (bad++ < 3) FAIL_CHECK("element " << i << ": gpu " << y[i] << " cpu " << ref[i] << " tol " << tol);
    }
    if (tol > 0) worst_ratio = std::max(worst_ratio, err / tol);
  }
  INFO("worst err/tol " << worst_ratio);
  CHECK(bad == 0);
}

struct Shape {
  int64_t n_in_blocks;  // row length in blocks (float types: 8-element units, see below)
  int64_t n_out;
};

int64_t row_len(GgmlType t, int64_t blocks) {
  const auto bs = ggml_type_info(t).block_size;
  return bs == 1 ? blocks * 8 : blocks * bs;
}

}  // namespace

TEST_CASE("cuda gemv matches the CPU reference for every type and shape class", "[gpu]") {
  if (!have_gpu()) return;
  const uint64_t seed = test::fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  for (GgmlType t : kTypes) {
    // one block, one row; odd rows; 5376-wide rows (21 super-blocks / 168 blocks)
    for (const auto& [n_in, n_out] : {std::pair<int64_t, int64_t>{row_len(t, 1), 1},
                                      {row_len(t, 3), 37},
                                      {5376, 29}}) {
      for (int n_cols : {1, 2, 3, 8, 16})
        for (bool q8 : {false, true}) check_matmul(t, n_in, n_out, n_cols, rng, q8);
    }
  }
  // Float rows of odd length take the element-by-element path.
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16}) {
    for (int n_cols : {1, 5, 16}) check_matmul(t, 13, 7, n_cols, rng);
  }
}

// The types with a GPU layout (kernels/gpu_layout.h): the K types, q8_0 and the i-quants.
const GgmlType kRepacked[] = {GgmlType::Q3_K,    GgmlType::Q4_K,  GgmlType::Q5_K,   GgmlType::Q6_K,  GgmlType::Q8_0,
                              GgmlType::IQ3_XXS, GgmlType::IQ3_S, GgmlType::IQ4_XS, GgmlType::IQ4_NL};

TEST_CASE("cuda gemv on the GPU layout matches the CPU reference, 1..16, 32 and 64 columns", "[gpu][gemv]") {
  if (!have_gpu()) return;
  const uint64_t seed = test::fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  for (int warps : {8, 16}) {  // warps per CTA (gemv_tuning.h): the engine picks either per shape
  kc::set_gemv_warps(warps);
  for (GgmlType t : kRepacked) {
    const int64_t c = kernels::gpu_layout_chunk(t);
    // one chunk, one row; a partial row group; several groups and fewer chunks than warps; long rows
    for (const auto& [n_in, n_out] : {std::pair<int64_t, int64_t>{c, 1}, {3 * c, 13}, {5376, 29}, {c * 37, 11}}) {
      INFO("warps " << warps);
      // The MMA kernel for every column count, and the dp4a kernel up to 16 columns.
      for (int mma_min : {1, 17}) {
        INFO("mma from " << mma_min << " columns");
        kc::set_gemv_mma_min_cols(mma_min);
        for (int n_cols = 1; n_cols <= 16; ++n_cols) check_matmul(t, n_in, n_out, n_cols, rng, true, true);
        if (mma_min == 1)
          for (int n_cols : {23, 32, 41, 64}) check_matmul(t, n_in, n_out, n_cols, rng, true, true);
      }
      kc::set_gemv_mma_min_cols(kc::kGemvMmaFromCols);
    }
  }
  }
  kc::set_gemv_warps(0);
}

// The engine's exactness contract (ForwardOptions::gpu_layout): a column's output does not depend
// on how many columns run with it, nor on which kernel runs it, bit for bit (dp4a up to 16, MMA up
// to 64): every count on either kernel against the MMA kernel's 64-column run.
TEST_CASE("cuda gemv on the GPU layout: a column's output does not depend on the column count or kernel", "[gpu][gemv]") {
  if (!have_gpu()) return;
  const uint64_t seed = test::fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  for (int warps : {8, 16}) {
  kc::set_gemv_warps(warps);
  for (GgmlType t : kRepacked) {
    const int64_t c = kernels::gpu_layout_chunk(t);
    // 8456 rows: more pairs of row groups (529) than an H100 or H200 holds CTAs of the MMA kernel at
    // once (2 x 132), so a persistent grid (set_gemv_mma_persist_from) walks several per CTA.
    for (const auto& [n_in, n_out] : {std::pair<int64_t, int64_t>{3 * c, 13}, {5376, 40}, {c, 8456}}) {
      INFO("warps " << warps << " type " << ggml_type_info(t).name << " n_in " << n_in << " n_out " << n_out);
      const HostWeights w = make_weights(t, n_in, n_out, rng);
      std::vector<uint8_t> packed(kernels::gpu_layout_bytes(t, n_in, n_out));
      kernels::repack_to_gpu_layout(w.view(), packed.data());
      constexpr int kMax = kc::kMaxGpuGemvCols;
      const auto x = test::random_normal(size_t(kMax * n_in), rng);
      DevBuf dw(packed.size()), dx(x.size() * 4), dy(size_t(kMax * n_out) * 4);
      check_ok(kc::copy_to_device(dw.p, packed.data(), packed.size(), nullptr));
      check_ok(kc::copy_to_device(dx.p, x.data(), x.size() * 4, nullptr));
      const auto dv = kernels::gpu_layout_view(dw.as<uint8_t>(), t, n_in, n_out);
      const size_t ws_bytes = kc::workspace_bytes_for_gemv(dv, kMax);
      DevBuf ws(ws_bytes);
      auto run = [&](int n_cols) {
        check_ok(kc::gemv(dv, dx.as<float>(), n_cols, dy.as<float>(), {ws.p, ws_bytes}, nullptr));
        std::vector<float> y(size_t(n_cols * n_out));
        check_ok(kc::copy_to_host(y.data(), dy.p, y.size() * 4, nullptr));
        check_ok(kc::synchronize(nullptr));
        return y;
      };
      kc::set_gemv_mma_min_cols(1);
      kc::set_gemv_mma_persist_from(0);
      const std::vector<float> all = run(kMax);
      for (int persist_from : {0, 1}) {  // one CTA per pair of row groups; a persistent grid
        INFO("persistent MMA grid from " << persist_from << " columns");
        kc::set_gemv_mma_persist_from(persist_from);
        for (int mma_min : {1, kc::kGemvMmaFromCols, kc::kMaxGpuGemvCols + 1}) {
          INFO("mma from " << mma_min << " columns");
          kc::set_gemv_mma_min_cols(mma_min);
          for (int n_cols : {1, 2, 3, 8, 9, 16, 17, 33}) {
            INFO("n_cols " << n_cols);
            const std::vector<float> y = run(n_cols);
            int differ = 0;
            for (size_t i = 0; i < y.size(); ++i) differ += std::memcmp(&y[i], &all[i], 4) != 0;
            CHECK(differ == 0);
          }
        }
      }
      kc::set_gemv_mma_persist_from(0);
      kc::set_gemv_mma_min_cols(kc::kGemvMmaFromCols);
    }
  }
  }
  kc::set_gemv_warps(0);
}

// Programmatic dependent launch (set_gemv_pdl, sm_90) changes when the GEMV starts, not what it
// computes: the quantiser + GEMV pair gives the same bits with it on and off.
TEST_CASE("cuda gemv on the GPU layout under programmatic dependent launch gives the same output", "[gpu][gemv]") {
  if (!have_gpu()) return;
  Rng rng(test::fresh_seed());
  for (GgmlType t : kRepacked) {
    constexpr int64_t n_in = 5376, n_out = 40;
    const HostWeights w = make_weights(t, n_in, n_out, rng);
    std::vector<uint8_t> packed(kernels::gpu_layout_bytes(t, n_in, n_out));
    kernels::repack_to_gpu_layout(w.view(), packed.data());
    const auto x = test::random_normal(size_t(16 * n_in), rng);
    DevBuf dw(packed.size()), dx(x.size() * 4), dy(size_t(16 * n_out) * 4);
    check_ok(kc::copy_to_device(dw.p, packed.data(), packed.size(), nullptr));
    check_ok(kc::copy_to_device(dx.p, x.data(), x.size() * 4, nullptr));
    const auto dv = kernels::gpu_layout_view(dw.as<uint8_t>(), t, n_in, n_out);
    const size_t ws_bytes = kc::workspace_bytes_for_gemv(dv, 16);
    DevBuf ws(ws_bytes);
    for (int n_cols : {1, 8, 16}) {
      INFO("type " << ggml_type_info(t).name << " n_cols " << n_cols);
      std::vector<float> y[2];
      for (int pdl : {0, 1}) {
        kc::set_gemv_pdl(pdl == 1);
        y[pdl].resize(size_t(n_cols * n_out));
        check_ok(kc::gemv(dv, dx.as<float>(), n_cols, dy.as<float>(), {ws.p, ws_bytes}, nullptr));
        check_ok(kc::copy_to_host(y[pdl].data(), dy.p, y[pdl].size() * 4, nullptr));
        check_ok(kc::synchronize(nullptr));
      }
      kc::set_gemv_pdl(false);
      CHECK(std::memcmp(y[0].data(), y[1].data(), y[0].size() * 4) == 0);
    }
  }
}

TEST_CASE("cuda gemv reusing the rounded activations of the previous call gives the same output", "[gpu][gemv]") {
  if (!have_gpu()) return;
  Rng rng(11);
  constexpr int64_t n_in = 512, n_out = 24;
  const auto x = test::random_normal(size_t(4 * n_in), rng);
  DevBuf dx(x.size() * 4);
  check_ok(kc::copy_to_device(dx.p, x.data(), x.size() * 4, nullptr));
  for (bool gpu : {false, true}) {
    INFO((gpu ? "gpu layout" : "gguf layout"));
    // Q (q3_K), then K (q4_K) and V (q6_K) of the same input: the keys say they may share it.
    std::vector<HostWeights> ws;
    std::vector<std::vector<uint8_t>> bytes;
    for (GgmlType t : {GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q6_K}) {
      ws.push_back(make_weights(t, n_in, n_out, rng));
      bytes.push_back(ws.back().bytes);
      if (gpu) {
        bytes.back().assign(kernels::gpu_layout_bytes(t, n_in, n_out), 0);
        kernels::repack_to_gpu_layout(ws.back().view(), bytes.back().data());
      }
    }
    std::vector<std::unique_ptr<DevBuf>> dw;
    std::vector<kernels::WeightView> views;
    for (size_t i = 0; i < ws.size(); ++i) {
      dw.push_back(std::make_unique<DevBuf>(bytes[i].size()));
      check_ok(kc::copy_to_device(dw.back()->p, bytes[i].data(), bytes[i].size(), nullptr));
      kernels::WeightView v = gpu ? kernels::gpu_layout_view(nullptr, ws[i].type, n_in, n_out) : ws[i].view();
      v.data = dw.back()->as<uint8_t>();
      views.push_back(v);
    }
    for (int n_cols : {1, 4}) {
      const size_t ws_bytes = kc::workspace_bytes_for_gemv(views[0], n_cols);
      DevBuf work(ws_bytes);
      const kc::Workspace w{work.p, ws_bytes};
      const int key = kc::gemv_act_key(views[0], n_cols, w);
      CHECK(key != 0);
      CHECK(kc::gemv_act_key(views[1], n_cols, w) == key);
      CHECK(kc::gemv_act_key(views[2], n_cols, w) == key);
      CHECK(kc::gemv_act_key(views[0], n_cols, {}) == 0);  // no workspace: the float kernel
      DevBuf y0(n_cols * n_out * 4), y1(n_cols * n_out * 4);
      for (size_t i = 1; i < views.size(); ++i) {
        check_ok(kc::gemv(views[i], dx.as<float>(), n_cols, y0.as<float>(), w, nullptr));  // fresh
        check_ok(kc::gemv(views[0], dx.as<float>(), n_cols, y1.as<float>(), w, nullptr));  // rounds x
        check_ok(kc::gemv(views[i], dx.as<float>(), n_cols, y1.as<float>(), w, nullptr, true));
        std::vector<float> a(size_t(n_cols * n_out)), b(a.size());
        check_ok(kc::copy_to_host(a.data(), y0.p, a.size() * 4, nullptr));
        check_ok(kc::copy_to_host(b.data(), y1.p, b.size() * 4, nullptr));
        check_ok(kc::synchronize(nullptr));
        CHECK(std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
      }
    }
    // Prefill-sized calls (gemm): the f16 copy of x is shared the same way (matmul_act_key).
    const int n_cols = kc::kMaxGemvCols + 8;
    size_t ws_bytes = 0;
    for (const auto& v : views) ws_bytes = std::max(ws_bytes, kc::workspace_bytes_for_gemm(v, n_cols));
    DevBuf work(ws_bytes), xb(size_t(n_cols) * n_in * 4), xb2(size_t(n_cols) * n_in * 4);
    const kc::Workspace w{work.p, ws_bytes};
    for (const auto& v : views) CHECK(kc::matmul_act_key(v, n_cols, w) == kc::kGemmActKey);
    CHECK(kc::matmul_act_key(views[0], n_cols, {}) == 0);
    std::vector<float> xs(size_t(n_cols) * n_in);
    for (size_t i = 0; i < xs.size(); ++i) xs[i] = x[i % x.size()] * (i % 3 == 0 ? -1.0f : 1.0f);
    check_ok(kc::copy_to_device(xb.p, xs.data(), xs.size() * 4, nullptr));
    for (float& v : xs) v = -0.5f * v;
    check_ok(kc::copy_to_device(xb2.p, xs.data(), xs.size() * 4, nullptr));
    DevBuf y0(n_cols * n_out * 4), y1(n_cols * n_out * 4), y2(n_cols * n_out * 4);
    for (size_t i = 1; i < views.size(); ++i) {
      check_ok(kc::matmul(views[i], xb.as<float>(), n_cols, y0.as<float>(), w, nullptr));  // fresh
      check_ok(kc::matmul(views[0], xb.as<float>(), n_cols, y1.as<float>(), w, nullptr));  // converts x
      check_ok(kc::matmul(views[i], xb.as<float>(), n_cols, y1.as<float>(), w, nullptr, true));
      // The flag takes effect: after another input was converted, "reuse" multiplies that one.
      check_ok(kc::matmul(views[0], xb2.as<float>(), n_cols, y2.as<float>(), w, nullptr));
      check_ok(kc::matmul(views[i], xb.as<float>(), n_cols, y2.as<float>(), w, nullptr, true));
      std::vector<float> a(size_t(n_cols * n_out)), b(a.size()), c(a.size());
      check_ok(kc::copy_to_host(a.data(), y0.p, a.size() * 4, nullptr));
      check_ok(kc::copy_to_host(b.data(), y1.p, b.size() * 4, nullptr));
      check_ok(kc::copy_to_host(c.data(), y2.p, c.size() * 4, nullptr));
      check_ok(kc::synchronize(nullptr));
      CHECK(std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
      CHECK(std::memcmp(a.data(), c.data(), a.size() * 4) != 0);
    }
  }
  // The q8_0 GPU layout permutes the activations per 32 elements, the K types per 256: no sharing.
  DevBuf work(1 << 16);
  const kc::Workspace w{work.p, size_t(1) << 16};
  const auto v8 = kernels::gpu_layout_view(work.as<uint8_t>(), GgmlType::Q8_0, 512, 8);
  const auto v4 = kernels::gpu_layout_view(work.as<uint8_t>(), GgmlType::Q4_K, 512, 8);
  CHECK(kc::gemv_act_key(v8, 1, w) != kc::gemv_act_key(v4, 1, w));
}

TEST_CASE("cuda gemm and dequantize_rows on the GPU layout", "[gpu][gemv]") {
  if (!have_gpu()) return;
  const uint64_t seed = test::fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  for (GgmlType t : kRepacked) {
    check_matmul(t, 5376, 45, 17, rng, false, true);  // f16 tiles decoded from the GPU layout
    INFO("type " << ggml_type_info(t).name);
    const int64_t n_in = kernels::gpu_layout_chunk(t) * 5, n_out = 19;
    const HostWeights w = make_weights(t, n_in, n_out, rng);
    std::vector<uint8_t> packed(kernels::gpu_layout_bytes(t, n_in, n_out));
    kernels::repack_to_gpu_layout(w.view(), packed.data());
    DevBuf dw(packed.size()), dout(w.deq.size() * 4), dids(4 * 4);
    check_ok(kc::copy_to_device(dw.p, packed.data(), packed.size(), nullptr));
    const std::vector<float> poison(w.deq.size(), std::numeric_limits<float>::quiet_NaN());
    check_ok(kc::copy_to_device(dout.p, poison.data(), poison.size() * 4, nullptr));
    const kernels::WeightView dv = kernels::gpu_layout_view(dw.as<uint8_t>(), t, n_in, n_out);
    const int64_t row0 = 5, n_rows = 13;  // crosses row groups, ends in the partial one
    check_ok(kc::dequantize_rows(dv, row0, n_rows, dout.as<float>(), nullptr));
    std::vector<float> got(size_t(n_rows * n_in));
    check_ok(kc::copy_to_host(got.data(), dout.p, got.size() * 4, nullptr));
    check_ok(kc::synchronize(nullptr));
    CHECK(std::memcmp(got.data(), w.deq.data() + row0 * n_in, got.size() * 4) == 0);
    // Gather (embedding rows), times 1: the same bits.
    const int32_t ids[4] = {18, 0, 7, 8};
    check_ok(kc::copy_to_device(dids.p, ids, sizeof(ids), nullptr));
    check_ok(kc::copy_to_device(dout.p, poison.data(), poison.size() * 4, nullptr));
    check_ok(kc::get_rows(dv, dids.as<int32_t>(), 4, 1.0f, dout.as<float>(), nullptr));
    check_ok(kc::copy_to_host(got.data(), dout.p, size_t(4 * n_in) * 4, nullptr));
    check_ok(kc::synchronize(nullptr));
    for (int i = 0; i < 4; ++i) CHECK(std::memcmp(got.data() + i * n_in, w.deq.data() + ids[i] * n_in, n_in * 4) == 0);
    // Without a workspace the GPU layout has no kernel: an error, not a wrong answer.
    CHECK_FALSE(kc::gemv(dv, dout.as<float>(), 1, dout.as<float>(), nullptr).is_ok());
  }
}

TEST_CASE("cuda gemm (f16 tiles + cuBLAS) matches the CPU reference", "[gpu]") {
  if (!have_gpu()) return;
  const uint64_t seed = test::fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  for (GgmlType t : kTypes) {
    for (const auto& [n_in, n_out] : {std::pair<int64_t, int64_t>{row_len(t, 1), 3}, {5376, 45}}) {
      for (int n_cols : {17, 64, 300}) check_matmul(t, n_in, n_out, n_cols, rng);
    }
  }
  // More rows than one f16 tile holds (64 MiB / (2 * 16384) = 2048 rows): several tiles.
  check_matmul(GgmlType::Q4_K, 16384, 2048 + 130, 17, rng);
}

// The i-quants (iq_decode.cuh): the int8-activation GEMV at 1..16 columns, the f32-activation GEMV,
// the GEMM (f16 tiles) and dequantize_rows, on random codes and quantised rows (make_weights).
const GgmlType kIqTypes[] = {GgmlType::IQ4_NL, GgmlType::IQ4_XS, GgmlType::IQ3_XXS, GgmlType::IQ3_S, GgmlType::IQ2_XXS,
                             GgmlType::IQ2_XS, GgmlType::IQ2_S,  GgmlType::IQ1_S,   GgmlType::IQ1_M};

TEST_CASE("cuda gemv gemm and dequantize_rows for the i-quants match the CPU reference at 1..16 columns", "[gpu][iq]") {
  if (!have_gpu()) return;
  const uint64_t seed = test::fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  for (GgmlType t : kIqTypes) {
    for (const auto& [n_in, n_out] : {std::pair<int64_t, int64_t>{row_len(t, 1), 1}, {row_len(t, 3), 37}, {5376, 29}}) {
      for (int n_cols = 1; n_cols <= kc::kMaxGemvCols; ++n_cols) check_matmul(t, n_in, n_out, n_cols, rng, true);
      for (int n_cols : {1, 3, 16}) check_matmul(t, n_in, n_out, n_cols, rng, false);
    }
    for (int n_cols : {17, 64}) check_matmul(t, 5376, 45, n_cols, rng);
    INFO("type " << ggml_type_info(t).name);
    const HostWeights w = make_weights(t, row_len(t, 5), 9, rng);
    DevBuf dw(w.bytes.size()), dout(w.deq.size() * 4);
    check_ok(kc::copy_to_device(dw.p, w.bytes.data(), w.bytes.size(), nullptr));
    const std::vector<float> poison(w.deq.size(), std::numeric_limits<float>::quiet_NaN());
    check_ok(kc::copy_to_device(dout.p, poison.data(), poison.size() * 4, nullptr));
    kernels::WeightView dv = w.view();
    dv.data = dw.as<uint8_t>();
    check_ok(kc::dequantize_rows(dv, 1, 7, dout.as<float>(), nullptr));
    std::vector<float> got(size_t(7 * w.n_in));
    check_ok(kc::copy_to_host(got.data(), dout.p, got.size() * 4, nullptr));
    check_ok(kc::synchronize(nullptr));
    CHECK(std::memcmp(got.data(), w.deq.data() + w.n_in, got.size() * 4) == 0);
  }
}

TEST_CASE("cuda dequantize_rows matches the CPU decoders bit for bit", "[gpu]") {
  if (!have_gpu()) return;
  const uint64_t seed = test::fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  for (GgmlType t : kTypes) {
    INFO("type " << ggml_type_info(t).name);
    const HostWeights w = make_weights(t, row_len(t, 5), 9, rng);
    DevBuf dw(w.bytes.size()), dout(w.deq.size() * 4);
    check_ok(kc::copy_to_device(dw.p, w.bytes.data(), w.bytes.size(), nullptr));
    const std::vector<float> poison(w.deq.size(), std::numeric_limits<float>::quiet_NaN());
    check_ok(kc::copy_to_device(dout.p, poison.data(), poison.size() * 4, nullptr));
    kernels::WeightView dv = w.view();
    dv.data = dw.as<uint8_t>();
    const int64_t row0 = 2, n_rows = 6;
    check_ok(kc::dequantize_rows(dv, row0, n_rows, dout.as<float>(), nullptr));
    std::vector<float> got(size_t(n_rows * w.n_in));
    check_ok(kc::copy_to_host(got.data(), dout.p, got.size() * 4, nullptr));
    check_ok(kc::synchronize(nullptr));
    CHECK(std::memcmp(got.data(), w.deq.data() + row0 * w.n_in, got.size() * 4) == 0);
  }
}

TEST_CASE("cuda matmul rejects bad input with a Status", "[gpu]") {
  if (!have_gpu()) return;
  Rng rng(test::fresh_seed());
  const HostWeights w = make_weights(GgmlType::Q4_K, 256, 4, rng);
  DevBuf dw(w.bytes.size()), dx(17 * 256 * 4), dy(17 * 4 * 4);
  kernels::WeightView dv = w.view();
  dv.data = dw.as<uint8_t>();
  for (int n_cols : {0, 17, -1}) {
    const Status s = kc::gemv(dv, dx.as<float>(), n_cols, dy.as<float>(), nullptr);
    REQUIRE_FALSE(s.is_ok());
    CHECK(s.message().find("gemv q4_K") != std::string::npos);
  }
  kernels::WeightView bad = dv;
  bad.type = GgmlType::Q8_1;  // no kernels (an activation-only type)
  CHECK_FALSE(kc::gemv(bad, dx.as<float>(), 1, dy.as<float>(), nullptr).is_ok());
  CHECK_FALSE(kc::dequantize_rows(bad, 0, 1, dy.as<float>(), nullptr).is_ok());
  CHECK_FALSE(kc::gemv(dv, nullptr, 1, dy.as<float>(), nullptr).is_ok());
  CHECK_FALSE(kc::gemm(dv, dx.as<float>(), 17, dy.as<float>(), kc::Workspace{}, nullptr).is_ok());  // no workspace
  CHECK_FALSE(kc::dequantize_rows(dv, 3, 2, dy.as<float>(), nullptr).is_ok());  // rows out of range
  kernels::WeightView ragged = dv;
  ragged.n_in = 200;  // not a multiple of 256
  CHECK_FALSE(kc::gemv(ragged, dx.as<float>(), 1, dy.as<float>(), nullptr).is_ok());
  check_ok(kc::synchronize(nullptr));  // nothing was launched that could fault
}

// Informational (a benchmark is not a test): 1-column GEMV bandwidth on a 27B-shaped matrix next
// to the device-read ceiling. Rotates over enough weight copies (>= 256 MiB) that L2 (60 MB on an
// H200) cannot serve them.
TEST_CASE("cuda gemv bandwidth, 1 column, 5376 x 21504 (informational)", "[gpu]") {
  if (!have_gpu()) return;
  auto ceiling = kc::measure_read_bandwidth(size_t(1) << 30, 5);
  REQUIRE(ceiling.is_ok());
  WARN("device read ceiling: " << *ceiling / 1e9 << " GB/s");
  Rng rng(test::fresh_seed());
  const int64_t n_in = 5376, n_out = 21504;
  for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q3_K, GgmlType::Q8_0, GgmlType::Q6_K, GgmlType::Q4_0,
                     GgmlType::Q2_K, GgmlType::Q5_K, GgmlType::F16}) {
    const uint64_t rb = ggml_row_bytes(t, n_in);
    const size_t mat = rb * n_out;
    const int copies = int(std::max<size_t>(2, ((size_t(256) << 20) + mat - 1) / mat));
    std::vector<uint8_t> host(mat);
    kernels::cpu::quant_kernels(t)->fill_random(host.data(), n_in * n_out, rng, 1.0f);
    DevBuf dw(mat * copies), dx(n_in * 4), dy(n_out * 4);
    for (int c = 0; c < copies; ++c) check_ok(kc::copy_to_device(dw.as<uint8_t>() + c * mat, host.data(), mat, nullptr));
    const auto x = test::random_normal(size_t(n_in), rng);
    check_ok(kc::copy_to_device(dx.p, x.data(), x.size() * 4, nullptr));
    auto view = [&](int c) { return kernels::WeightView{dw.as<uint8_t>() + c * mat, t, n_in, n_out, rb}; };
    for (int c = 0; c < copies; ++c) check_ok(kc::gemv(view(c), dx.as<float>(), 1, dy.as<float>(), nullptr));
    check_ok(kc::synchronize(nullptr));
    const int iters = 50 * copies;
    for (int n_cols : {1, 8}) {
      DevBuf dx8(size_t(n_cols) * n_in * 4), dy8(size_t(n_cols) * n_out * 4);
      check_ok(kc::memset_device(dx8.p, 0, dx8.bytes, nullptr));
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < iters; ++i) {
        check_ok(kc::gemv(view(i % copies), dx8.as<float>(), n_cols, dy8.as<float>(), nullptr));
      }
      check_ok(kc::synchronize(nullptr));
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
      const double gbs = double(mat) / s / 1e9;
      WARN("gemv " << ggml_type_info(t).name << " 5376x21504 n_cols " << n_cols << ": " << s * 1e6 << " us, "
                   << gbs << " GB/s = " << 100.0 * gbs * 1e9 / *ceiling << "% of read ceiling");
    }
  }
}
