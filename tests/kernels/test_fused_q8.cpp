// The team jobs that quantise their own output for the next int8 matmul (kernels/cpu/gated_ffn_q8.h,
// attention's out_q8): bit for bit what the unfused steps give (matmul_q8_group, the activation
// over the whole vector, quantize_q8_act), on teams of several sizes (the rows cut elsewhere) and
// several token columns, into poisoned buffers (an element no part writes fails).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <vector>

#include <tbb/global_control.h>
#include <tbb/task_arena.h>

#include "core/ggml_type.h"
#include "core/rng.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/gated_ffn_q8.h"
#include "kernels/cpu/gemv_q8.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/quant_kernels.h"
#include "kernel_test_buffers.h"
#include "test_util.h"

namespace {

using namespace strata;
using namespace strata::kernels;
using namespace strata::kernels::cpu;

bool same_floats(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

template <typename Fn>
void on_team(int threads, Fn fn) {
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism, size_t(threads));
  tbb::task_arena(threads).execute(fn);
}

}  // namespace

TEST_CASE("gated_ffn_q8: gate, up and the down input equal matmul_q8_group, the activation and quantize_q8_act", "[q8]") {
  const uint64_t seed = test::fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  const int64_t n_in = 512;
  // n_ff: whole 256-element chunks, and a tail of groups of 32 past them (q8_act.h's lane order).
  for (const int64_t n_ff : {int64_t(1024), int64_t(1024 + 96)}) {
    const auto gb = test::random_quant_rows(GgmlType::Q4_K, n_in, n_ff, rng), ub = test::random_quant_rows(GgmlType::Q6_K, n_in, n_ff, rng);
    const WeightView gate{gb.data(), GgmlType::Q4_K, n_in, n_ff, ggml_row_bytes(GgmlType::Q4_K, uint64_t(n_in))};
    const WeightView up{ub.data(), GgmlType::Q6_K, n_in, n_ff, ggml_row_bytes(GgmlType::Q6_K, uint64_t(n_in))};
    for (const int64_t n_tok : {int64_t(1), int64_t(5)}) {
      for (const bool gelu : {true, false}) {
        INFO("n_ff " << n_ff << " tokens " << n_tok << (gelu ? " gelu" : " silu"));
        const std::vector<float> x = test::random_normal(size_t(n_in * n_tok), rng);
        const size_t bytes = q8_act_bytes(n_ff, n_tok);
        // The unfused steps.
        std::vector<float> g_want(size_t(n_ff * n_tok)), u_want(g_want.size());
        const WeightView* ws[2] = {&gate, &up};
        float* ys[2] = {g_want.data(), u_want.data()};
        matmul_q8_group(ws, ys, 2, x.data(), n_tok);
        if (gelu) gelu_tanh_mul(g_want.data(), u_want.data(), int64_t(g_want.size()));
        else silu_mul(g_want.data(), u_want.data(), int64_t(g_want.size()));
        test::PoisonedBuffer q_want(bytes, 0xA5);
        quantize_q8_act(g_want.data(), n_ff, n_tok, q_want.at);
        for (const int threads : {1, 3, 8}) {
          INFO("threads " << threads);
          std::vector<float> g(g_want.size(), std::nanf("")), u(g.size(), std::nanf(""));
          test::PoisonedBuffer q(bytes, 0xA5);
          on_team(threads, [&] {
            gated_ffn_q8(gate, up, gelu ? gelu_tanh_mul_range : silu_mul_range, x.data(), n_tok, g.data(), u.data(), q.at);
          });
          CHECK(same_floats(g, g_want));
          CHECK(same_floats(u, u_want));
          CHECK(std::memcmp(q.at, q_want.at, bytes) == 0);
        }
      }
    }
  }
}

TEST_CASE("CPU attention: out_q8 equals quantize_q8_act of the output", "[attention]") {
  const uint64_t seed = test::fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  const int64_t n_head = 8, n_head_kv = 2, hd = 64, width = n_head_kv * hd, slots = 300;
  const std::vector<float> k = test::random_normal(size_t(slots * width), rng), v = test::random_normal(k.size(), rng);
  const KvStore kv{k.data(), v.data(), GgmlType::F32, GgmlType::F32, slots};
  const AttentionShape s{n_head, n_head_kv, hd, 0, 0.125f};
  for (const int64_t n_q : {int64_t(1), int64_t(3)}) {
    INFO("queries " << n_q);
    const std::vector<float> q = test::random_normal(size_t(n_q * n_head * hd), rng);
    std::vector<int32_t> pos;
    for (int64_t i = 0; i < n_q; ++i) pos.push_back(int32_t(250 + i));
    std::vector<float> want(q.size());
    attention(q.data(), pos.data(), n_q, kv, s, want.data());
    const size_t bytes = q8_act_bytes(n_head * hd, n_q);
    test::PoisonedBuffer q_want(bytes, 0xA5);
    quantize_q8_act(want.data(), n_head * hd, n_q, q_want.at);
    for (const int threads : {1, 3, 8}) {
      INFO("threads " << threads);
      std::vector<float> out(q.size(), std::nanf(""));
      test::PoisonedBuffer q8(bytes, 0xA5);
      on_team(threads, [&] { attention(q.data(), pos.data(), n_q, kv, s, out.data(), q8.at); });
      CHECK(same_floats(out, want));
      CHECK(std::memcmp(q8.at, q_want.at, bytes) == 0);
    }
  }
}
