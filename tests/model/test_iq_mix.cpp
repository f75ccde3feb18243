// The i-quant mixes follow the table of docs/quantization.md: per role and layer, with GQA and
// tied-head cases and the IQ4_NL fallback for rows 256 does not divide; file_type ids are
// llama.cpp's; parse_quantize_target takes a type name before a mix of the same name.
#include <catch2/catch.hpp>

#include "model/quant_mix.h"
#include "model/quantize.h"

namespace {

using namespace strata;
using namespace strata::model;
using R = TensorRole;
using T = GgmlType;

HParams shape(uint32_t n_layer, uint32_t n_head, uint32_t n_head_kv, bool tied) {
  HParams hp;
  hp.n_layer = n_layer;
  hp.n_head = n_head;
  hp.n_head_kv = n_head_kv;
  hp.tied_output = tied;
  return hp;
}

T type_of(const std::string& mix, R role, int layer, const HParams& hp, uint64_t row = 4096) {
  return mix_tensor_type(mix, T::F32, role, layer, hp, row);
}

}  // namespace

TEST_CASE("iq mixes: per-tensor rules of the table", "[quant_mix]") {
  const HParams gqa8 = shape(32, 32, 4, false);   // n_head / n_head_kv = 8
  const HParams mha = shape(32, 32, 32, true);    // tied head
  // iq3_xxs
  CHECK(type_of("iq3_xxs", R::attn_q, 10, gqa8) == T::IQ3_XXS);
  CHECK(type_of("iq3_xxs", R::ffn_gate, 10, gqa8) == T::IQ3_XXS);
  CHECK(type_of("iq3_xxs", R::attn_v, 10, gqa8) == T::Q4_K);
  CHECK(type_of("iq3_xxs", R::attn_v, 10, mha) == T::IQ3_S);
  CHECK(type_of("iq3_xxs", R::ffn_down, 3, gqa8) == T::IQ3_S);   // first eighth: layers 0-3
  CHECK(type_of("iq3_xxs", R::ffn_down, 4, gqa8) == T::IQ3_XXS);
  CHECK(type_of("iq3_xxs", R::output, -1, gqa8) == T::Q5_K);
  CHECK(type_of("iq3_xxs", R::token_embd, -1, gqa8) == T::IQ3_S);  // untied
  CHECK(type_of("iq3_xxs", R::token_embd, -1, mha) == T::Q5_K);    // tied: the head
  CHECK(type_of("iq3_xxs", R::attn_norm, 0, gqa8) == T::F32);
  // iq3_xs, iq3_m
  CHECK(type_of("iq3_xs", R::attn_output, 5, gqa8) == T::IQ3_S);
  CHECK(type_of("iq3_xs", R::ffn_down, 0, gqa8) == T::IQ3_S);    // "more bits"
  CHECK(type_of("iq3_xs", R::ffn_down, 5, gqa8) == T::IQ3_XXS);
  CHECK(type_of("iq3_xs", R::ffn_up, 5, gqa8) == T::IQ3_XXS);
  CHECK(type_of("iq3_m", R::ffn_up, 5, gqa8) == T::IQ3_S);
  CHECK(type_of("iq3_m", R::attn_v, 5, mha) == T::Q4_K);
  CHECK(type_of("iq3_m", R::ffn_down, 31, gqa8) == T::Q4_K);
  CHECK(type_of("iq3_m", R::output, -1, gqa8) == T::Q6_K);
  // iq2_m
  CHECK(type_of("iq2_m", R::attn_q, 5, gqa8) == T::IQ2_S);
  CHECK(type_of("iq2_m", R::attn_v, 5, gqa8) == T::IQ4_XS);
  CHECK(type_of("iq2_m", R::attn_v, 5, mha) == T::IQ3_S);
  CHECK(type_of("iq2_m", R::ffn_down, 0, gqa8) == T::IQ3_S);
  CHECK(type_of("iq2_m", R::token_embd, -1, gqa8) == T::Q2_K);
  // iq4_xs
  CHECK(type_of("iq4_xs", R::attn_v, 5, gqa8) == T::Q5_K);
  CHECK(type_of("iq4_xs", R::attn_v, 5, mha) == T::IQ4_XS);
  CHECK(type_of("iq4_xs", R::ffn_down, 5, gqa8) == T::IQ4_XS);
  // Rows 256 does not divide (gemma3-1b's 1152): i-quants fall back to IQ4_NL, K types as before.
  CHECK(type_of("iq3_xxs", R::attn_q, 10, gqa8, 1152) == T::IQ4_NL);
  CHECK(type_of("iq3_xxs", R::attn_v, 10, gqa8, 1152) == T::Q5_0);  // q4_k -> q5_0
  CHECK(mix_tensor_type("", T::IQ2_XS, R::ffn_up, 1, gqa8, 1152) == T::IQ4_NL);
  CHECK(mix_tensor_type("", T::IQ4_NL, R::ffn_up, 1, gqa8, 1152) == T::IQ4_NL);
}

TEST_CASE("iq mixes: names, file types, parsing", "[quant_mix]") {
  for (const char* m : {"iq3_xxs", "iq3_xs", "iq3_m", "iq2_m", "iq4_xs"}) CHECK(is_quant_mix(m));
  CHECK(file_type_id("iq3_xxs", T::F32) == 23);
  CHECK(file_type_id("iq2_m", T::F32) == 29);
  CHECK(file_type_id("", T::IQ2_XXS) == 19);
  CHECK(file_type_id("", T::IQ1_M) == 31);
  auto t = parse_quantize_target("IQ4_XS");
  REQUIRE(t.is_ok());
  CHECK(t->mix.empty());
  CHECK(t->type == T::IQ4_XS);
  auto m = parse_quantize_mix("iq4_xs");
  REQUIRE(m.is_ok());
  CHECK(m->mix == "iq4_xs");
  auto k = parse_quantize_target("q4_k_m");
  REQUIRE(k.is_ok());
  CHECK(k->mix == "q4_k_m");
  for (const char* g : {"iq3_xxs", "iq3_s", "iq2_xxs", "iq2_xs", "iq2_s", "iq1_s", "iq1_m"}) {
    auto g2 = parse_quantize_target(g);
    INFO(g);
    CHECK(g2.is_ok());
  }
  CHECK_FALSE(parse_quantize_mix("q4_k").is_ok());
  CHECK_FALSE(parse_quantize_target("iq9_x").is_ok());
}
