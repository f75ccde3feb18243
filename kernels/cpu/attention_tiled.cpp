#include "kernels/cpu/attention_tiled.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include <cblas.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>

#include "core/status.h"
#include "kernels/cpu/kv_slices.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/quant_kernels.h"

namespace strata::kernels::cpu {
namespace {

constexpr int64_t kQueryTile = 64;  // queries of one head per task
constexpr int64_t kKeyTile = 256;   // keys decoded per step (K and V: 2 x 256 x head_dim floats)

// One KV store's head slices decoded to f32 rows (f32 is a copy; f16 and quantised types decode).
struct SliceDecoder {
  KvSlices slices;
  DequantizeFn decode;
  SliceDecoder(const void* p, GgmlType t, int64_t width, int64_t hd)
      : slices(p, t, width, hd), decode(best_dequantize(t)) {}
  void operator()(int64_t slot, int64_t kv_head, float* dst) const {
    decode(slices.at(slot, kv_head), dst, slices.head_dim);
  }
};

struct Scratch {
  std::vector<float> k, v, scores, acc, max, sum;
};

}  // namespace

void attention_tiled(const float* q, const int32_t* pos, int64_t n_q, const KvStore& kv, const AttentionShape& s,
                     float* out) {
  STRATA_CHECK(best_dequantize(kv.k_dtype) && best_dequantize(kv.v_dtype), "attention_tiled: KV types {}/{}",
               ggml_type_info(kv.k_dtype).name, ggml_type_info(kv.v_dtype).name);
  // Sinks are a drafter's window (runtime/draft_window.h), whose passes are exact (query by query).
  STRATA_CHECK(s.sinks == 0, "attention_tiled: attention sinks are not supported (got {})", s.sinks);
  use_single_threaded_blas();
  static tbb::enumerable_thread_specific<Scratch> scratch;
  const int64_t hd = s.head_dim, group = s.n_head / s.n_head_kv, width = s.n_head_kv * hd;
  const int64_t q_stride = s.n_head * hd;  // floats between one query's rows of a head
  const SliceDecoder K(kv.k, kv.k_dtype, width, hd), V(kv.v, kv.v_dtype, width, hd);
  const int64_t n_tiles = (n_q + kQueryTile - 1) / kQueryTile;
  auto first_key = [&](int64_t i) { return s.window > 0 ? std::max<int64_t>(0, pos[i] - s.window + 1) : 0; };

  tbb::parallel_for(int64_t(0), n_tiles * s.n_head, [&](int64_t task) {
    const int64_t h = task % s.n_head, i0 = (task / s.n_head) * kQueryTile;
    const int64_t nt = std::min(kQueryTile, n_q - i0);
    int64_t k_lo = INT64_MAX, k_hi = -1;
    for (int64_t i = i0; i < i0 + nt; ++i) {
      k_lo = std::min(k_lo, first_key(i));
      k_hi = std::max<int64_t>(k_hi, pos[i]);
    }
    Scratch& w = scratch.local();
    w.k.resize(size_t(kKeyTile * hd));
    w.v.resize(size_t(kKeyTile * hd));
    w.scores.resize(size_t(kQueryTile * kKeyTile));
    w.acc.assign(size_t(nt * hd), 0.0f);
    w.max.assign(size_t(nt), -INFINITY);
    w.sum.assign(size_t(nt), 0.0f);
    const float* qh = q + i0 * q_stride + h * hd;
    for (int64_t k0 = k_lo; k0 <= k_hi; k0 += kKeyTile) {
      const int64_t nk = std::min(kKeyTile, k_hi - k0 + 1);
      for (int64_t j = 0; j < nk; ++j) {
        const int64_t slot = (k0 + j) % kv.capacity;
        K(slot, h / group, w.k.data() + j * hd);
        V(slot, h / group, w.v.data() + j * hd);
      }
      // scores (nt x nk) = scale * Q (nt x hd, rows q_stride apart) K^T
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(nt), int(nk), int(hd), s.scale, qh, int(q_stride),
                  w.k.data(), int(hd), 0.0f, w.scores.data(), int(nk));
      // Mask, then the online softmax: probabilities against the running max; the sum and the
      // partial output scaled down by exp(old max - new max) when the max grows.
      for (int64_t i = 0; i < nt; ++i) {
        float* sc = w.scores.data() + i * nk;
        const int64_t lo = first_key(i0 + i), hi = pos[i0 + i];
        float tile_max = -INFINITY;
        for (int64_t j = 0; j < nk; ++j) {
          const int64_t kp = k0 + j;
          if (kp < lo || kp > hi) sc[j] = -INFINITY;
          tile_max = std::max(tile_max, sc[j]);
        }
        if (tile_max == -INFINITY) {  // nothing of this tile is visible to query i
          std::fill(sc, sc + nk, 0.0f);
          continue;
        }
        const float new_max = std::max(w.max[i], tile_max);
        const float rescale = std::exp(w.max[i] - new_max);  // 0 while nothing was seen
        float tile_sum = 0;
        for (int64_t j = 0; j < nk; ++j) {
          sc[j] = std::exp(sc[j] - new_max);  // masked: exp(-inf) = 0
          tile_sum += sc[j];
        }
        w.sum[i] = w.sum[i] * rescale + tile_sum;
        w.max[i] = new_max;
        if (rescale != 1.0f)
          for (int64_t d = 0; d < hd; ++d) w.acc[i * hd + d] *= rescale;
      }
      // acc (nt x hd) += P (nt x nk) V (nk x hd)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(nt), int(hd), int(nk), 1.0f, w.scores.data(),
                  int(nk), w.v.data(), int(hd), 1.0f, w.acc.data(), int(hd));
    }
    for (int64_t i = 0; i < nt; ++i) {
      float* o = out + (i0 + i) * q_stride + h * hd;
      const float inv = w.sum[i] > 0 ? 1.0f / w.sum[i] : 0.0f;
      for (int64_t d = 0; d < hd; ++d) o[d] = w.acc[i * hd + d] * inv;
    }
  });
}

}  // namespace strata::kernels::cpu
