#include "model/quant_mix.h"

#include <algorithm>

#include "core/status.h"

namespace strata::model {
namespace {

// llama.cpp's "more bits" layers: the first and last eighth, and every third one between.
bool use_more_bits(int layer, int n_layer) {
  return layer < n_layer / 8 || layer >= 7 * n_layer / 8 || (layer - n_layer / 8) % 3 == 2;
}

// Per-tensor types of the K-quant mixes (shape of llama.cpp's rules, simplified: the output /
// tied embedding gets Q6_K, attn_v and ffn_down more bits in the sensitive layers).
GgmlType mix_type(const std::string& mix, TensorRole role, int layer, int n_layer) {
  using R = TensorRole;
  using T = GgmlType;
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
  static const std::vector<std::string> kNames = {"q3_k_s", "q3_k_m", "q3_k_l", "q4_k_s", "q4_k_m"};
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

GgmlType k_fallback(GgmlType t) {
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
  GgmlType t = mix.empty() ? type : mix_type(mix, as, layer, int(hp.n_layer));
  if (is_k_type(t) && row_len % 256 != 0) t = k_fallback(t);
  return t;
}

uint32_t file_type_id(const std::string& mix, GgmlType type) {
  if (mix == "q3_k_s") return 11;
  if (mix == "q3_k_m") return 12;
  if (mix == "q3_k_l") return 13;
  if (mix == "q4_k_s") return 14;
  if (mix == "q4_k_m") return 15;
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
    case GgmlType::BF16: return 32;
    default: return 0;
  }
}

}  // namespace strata::model
