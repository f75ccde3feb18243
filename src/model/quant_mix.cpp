#include "model/quant_mix.h"

#include <algorithm>

#include "core/status.h"

namespace strata::model {
namespace {

// llama.cpp's "more bits" layers: the first and last eighth, and every third one between.
bool use_more_bits(int layer, int n_layer) {
  return layer < n_layer / 8 || layer >= 7 * n_layer / 8 || (layer - n_layer / 8) % 3 == 2;
}

// Per-tensor types of the i-quant mixes (the shape of llama.cpp's rules for its IQ file types,
// simplified; the table is in README "Quantisation mixes"): the head gets a K type, attn_v more
// bits (most with grouped-query attention, where it is small: n_head / n_head_kv >= 4), ffn_down
// more in the first eighth of the layers (or llama.cpp's "more bits" layers), an untied token
// embedding a 3-bit type (it is read one row per token, never multiplied).
GgmlType iq_mix_type(const std::string& mix, TensorRole role, int layer, int n_layer, bool gqa4) {
  using R = TensorRole;
  using T = GgmlType;
  const bool head = role == R::output, first8 = layer < std::max(1, n_layer / 8);
  if (mix == "iq3_xxs") {
    if (head) return T::Q5_K;
    if (role == R::token_embd) return T::IQ3_S;
    if (role == R::attn_v) return gqa4 ? T::Q4_K : T::IQ3_S;
    if (role == R::ffn_down && first8) return T::IQ3_S;
    return T::IQ3_XXS;
  }
  if (mix == "iq3_xs") {
    if (head) return T::Q6_K;
    if (role == R::token_embd || role == R::attn_output) return T::IQ3_S;
    if (role == R::attn_v) return gqa4 ? T::Q4_K : T::IQ3_S;
    if (role == R::ffn_down) return use_more_bits(layer, n_layer) ? T::IQ3_S : T::IQ3_XXS;
    return T::IQ3_XXS;
  }
  if (mix == "iq3_m") {
    if (head) return T::Q6_K;
    if (role == R::attn_v || role == R::attn_output) return T::Q4_K;
    if (role == R::ffn_down && use_more_bits(layer, n_layer)) return T::Q4_K;
    return T::IQ3_S;
  }
  if (mix == "iq2_m") {
    if (head) return T::Q5_K;
    if (role == R::token_embd) return T::Q2_K;
    if (role == R::attn_v) return gqa4 ? T::IQ4_XS : T::IQ3_S;
    if (role == R::ffn_down && first8) return T::IQ3_S;
    return T::IQ2_S;
  }
  if (mix == "iq4_xs") {
    if (head) return T::Q6_K;
    if (role == R::attn_v && gqa4) return T::Q5_K;
    return T::IQ4_XS;
  }
  STRATA_CHECK(false, "unknown mix '{}' (validated by the caller)", mix);
  __builtin_unreachable();
}

// Per-tensor types of the K-quant mixes (shape of llama.cpp's rules, simplified: the output /
// tied embedding gets Q6_K, attn_v and ffn_down more bits in the sensitive layers).
GgmlType mix_type(const std::string& mix, TensorRole role, int layer, int n_layer, bool gqa4) {
  using R = TensorRole;
  using T = GgmlType;
  if (mix.rfind("iq", 0) == 0) return iq_mix_type(mix, role, layer, n_layer, gqa4);
  const bool head = role == R::output;
  if (mix == "q3_k_s") return head ? T::Q6_K : T::Q3_K;
  if (mix == "q3_k_m") {
    if (head) return T::Q6_K;
    if (role == R::attn_v) return layer < 2 ? T::Q5_K : T::Q4_K;
    if (role == R::ffn_down) return layer < n_layer / 16 ? T::Q5_K : use_more_bits(layer, n_layer) ? T::Q4_K : T::Q3_K;
    if (role == R::attn_output) return T::Q4_K;
    return T::Q3_K;
  }
  if (mix == "q3_k_l") {
    if (head) return T::Q6_K;
    if (role == R::attn_v || role == R::ffn_down || role == R::attn_output) return T::Q5_K;
    return T::Q3_K;
  }
  if (mix == "q4_k_s") {
    if (head) return T::Q6_K;
    if (role == R::attn_v && layer < 4) return T::Q5_K;
    return T::Q4_K;
  }
  if (mix == "q4_k_m") {
    if (head) return T::Q6_K;
    if ((role == R::attn_v || role == R::ffn_down) && use_more_bits(layer, n_layer)) return T::Q6_K;
    return T::Q4_K;
  }
  STRATA_CHECK(false, "unknown mix '{}' (validated by the caller)", mix);
  __builtin_unreachable();
}

}  // namespace

const std::vector<std::string>& quant_mix_names() {
  static const std::vector<std::string> kNames = {"q3_k_s", "q3_k_m", "q3_k_l", "q4_k_s", "q4_k_m",
                                                  "iq3_xxs", "iq3_xs", "iq3_m", "iq2_m", "iq4_xs"};
  return kNames;
}

bool is_quant_mix(const std::string& name) {
  const auto& n = quant_mix_names();
  return std::find(n.begin(), n.end(), name) != n.end();
}

bool is_k_type(GgmlType t) {
  return t == GgmlType::Q2_K || t == GgmlType::Q3_K || t == GgmlType::Q4_K || t == GgmlType::Q5_K ||
         t == GgmlType::Q6_K;
}

bool is_iq_super_type(GgmlType t) {
  switch (t) {
    case GgmlType::IQ2_XXS: case GgmlType::IQ2_XS: case GgmlType::IQ2_S: case GgmlType::IQ3_XXS:
    case GgmlType::IQ3_S: case GgmlType::IQ1_S: case GgmlType::IQ1_M: case GgmlType::IQ4_XS: return true;
    default: return false;
  }
}

GgmlType k_fallback(GgmlType t) {
  if (is_iq_super_type(t)) return GgmlType::IQ4_NL;
  switch (t) {
    case GgmlType::Q2_K: case GgmlType::Q3_K: return GgmlType::Q4_0;
    case GgmlType::Q4_K: return GgmlType::Q5_0;
    case GgmlType::Q5_K: return GgmlType::Q5_1;
    case GgmlType::Q6_K: return GgmlType::Q8_0;
    default: return t;
  }
}

GgmlType mix_tensor_type(const std::string& mix, GgmlType type, TensorRole role, int layer, const HParams& hp,
                         uint64_t row_len) {
  if (role_info(role).is_norm) return GgmlType::F32;
  TensorRole as = role;
  // A tied embedding doubles as the output head: quantise it like one (llama.cpp does the same).
  if (role == TensorRole::token_embd && hp.tied_output) as = TensorRole::output;
  const bool gqa4 = hp.n_head_kv > 0 && hp.n_head >= 4 * hp.n_head_kv;
  // A mix's rule for the token embedding applies only when it is not the head.
  const bool head = as == TensorRole::output;
  GgmlType t = mix.empty() ? type : mix_type(mix, head ? TensorRole::output : role, layer, int(hp.n_layer), gqa4);
  if ((is_k_type(t) || is_iq_super_type(t)) && row_len % 256 != 0) t = k_fallback(t);
  return t;
}

uint32_t file_type_id(const std::string& mix, GgmlType type) {
  if (mix == "q3_k_s") return 11;
  if (mix == "q3_k_m") return 12;
  if (mix == "q3_k_l") return 13;
  if (mix == "q4_k_s") return 14;
  if (mix == "q4_k_m") return 15;
  // LLAMA_FTYPE_MOSTLY_IQ*: IQ3_XS 22, IQ3_XXS 23, IQ3_M 27, IQ2_M 29, IQ4_XS 30.
  if (mix == "iq3_xs") return 22;
  if (mix == "iq3_xxs") return 23;
  if (mix == "iq3_m") return 27;
  if (mix == "iq2_m") return 29;
  if (mix == "iq4_xs") return 30;
  switch (type) {
    case GgmlType::F32: return 0;
    case GgmlType::F16: return 1;
    case GgmlType::Q4_0: return 2;
    case GgmlType::Q4_1: return 3;
    case GgmlType::Q8_0: return 7;
    case GgmlType::Q5_0: return 8;
    case GgmlType::Q5_1: return 9;
    case GgmlType::Q2_K: return 10;
    case GgmlType::Q3_K: return 12;
    case GgmlType::Q4_K: return 15;
    case GgmlType::Q5_K: return 17;
    case GgmlType::Q6_K: return 18;
    case GgmlType::IQ2_XXS: return 19;
    case GgmlType::IQ2_XS: return 20;
    case GgmlType::IQ3_XXS: return 23;
    case GgmlType::IQ1_S: return 24;
    case GgmlType::IQ4_NL: return 25;
    case GgmlType::IQ3_S: return 26;
    case GgmlType::IQ2_S: return 28;
    case GgmlType::IQ4_XS: return 30;
    case GgmlType::IQ1_M: return 31;
    case GgmlType::BF16: return 32;
    default: return 0;
  }
}

}  // namespace strata::model
