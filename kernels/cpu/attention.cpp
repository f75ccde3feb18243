#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>

#include "core/half.h"

namespace strata::kernels::cpu {
namespace {

inline float load(const float* p, int64_t i) { return p[i]; }
inline float load(const uint16_t* p, int64_t i) { return f16_to_f32(p[i]); }

template <typename T>
void attend_one(const float* q, int32_t pos, const T* K, const T* V, int64_t capacity, int64_t kv_head,
                const AttentionShape& s, std::vector<float>& scores, float* out) {
  const int64_t hd = s.head_dim, stride = s.n_head_kv * hd;
  const int64_t lo = s.window > 0 ? std::max<int64_t>(0, int64_t(pos) - s.window + 1) : 0;
  const int64_t n = int64_t(pos) - lo + 1;
  scores.resize(size_t(n));
  float max_score = -INFINITY;
  for (int64_t j = 0; j < n; ++j) {
    const T* k = K + ((lo + j) % capacity) * stride + kv_head * hd;
    float dot = 0;
    for (int64_t d = 0; d < hd; ++d) dot += q[d] * load(k, d);
    scores[j] = dot * s.scale;
    max_score = std::max(max_score, scores[j]);
  }
  double denom = 0;
  for (int64_t j = 0; j < n; ++j) {
    scores[j] = std::exp(scores[j] - max_score);
    denom += scores[j];
  }
  const float inv = float(1.0 / denom);
  std::fill(out, out + hd, 0.0f);
  for (int64_t j = 0; j < n; ++j) {
    const T* v = V + ((lo + j) % capacity) * stride + kv_head * hd;
    const float p = scores[j] * inv;
    for (int64_t d = 0; d < hd; ++d) out[d] += p * load(v, d);
  }
}

template <typename T>
void attention_typed(const float* q, const int32_t* pos, int64_t n_q, const KvStore& kv, const AttentionShape& s,
                     float* out) {
  static tbb::enumerable_thread_specific<std::vector<float>> scratch;
  const int64_t group = s.n_head / s.n_head_kv;
  const auto* K = static_cast<const T*>(kv.k);
  const auto* V = static_cast<const T*>(kv.v);
  tbb::parallel_for(int64_t(0), n_q * s.n_head, [&](int64_t idx) {
    const int64_t i = idx / s.n_head, h = idx % s.n_head;
    const int64_t off = (i * s.n_head + h) * s.head_dim;
    attend_one(q + off, pos[i], K, V, kv.capacity, h / group, s, scratch.local(), out + off);
  });
}

}  // namespace

void attention(const float* q, const int32_t* pos, int64_t n_q, const KvStore& kv, const AttentionShape& s,
               float* out) {
  if (kv.dtype == GgmlType::F16) return attention_typed<uint16_t>(q, pos, n_q, kv, s, out);
  attention_typed<float>(q, pos, n_q, kv, s, out);
}

}  // namespace strata::kernels::cpu
