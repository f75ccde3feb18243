#include "kv/kv_cache.h"

#include <algorithm>
#include <cstring>

#include "core/half.h"
#include "core/units.h"

namespace strata::kv {

Result<KvCache> KvCache::create(const std::vector<LayerShape>& layers, uint32_t n_ctx, uint32_t margin,
                                GgmlType dtype) {
  if (dtype != GgmlType::F32 && dtype != GgmlType::F16)
    return Status::error("KV cache type {} is not supported here (f32, f16)", ggml_type_info(dtype).name);
  if (n_ctx == 0) return Status::error("context length must be positive");
  KvCache c;
  c.n_ctx_ = n_ctx;
  c.dtype_ = dtype;
  const size_t elem = dtype == GgmlType::F16 ? 2 : 4;
  for (const auto& shape : layers) {
    Layer l;
    l.shape = shape;
    l.capacity = shape.window ? std::min<uint32_t>(n_ctx, shape.window + margin) : n_ctx;
    const size_t bytes = size_t(l.capacity) * shape.width * elem;
    try {
      l.k.resize(bytes);
      l.v.resize(bytes);
    } catch (const std::bad_alloc&) {
      return Status::error("cannot allocate the KV cache ({} per layer for {} tokens)", format_bytes(2 * bytes), n_ctx);
    }
    c.layers_.push_back(std::move(l));
  }
  return c;
}

uint64_t KvCache::bytes() const {
  uint64_t b = 0;
  for (const auto& l : layers_) b += l.k.size() + l.v.size();
  return b;
}

void KvCache::write(uint32_t il, uint32_t pos, const float* k, const float* v) {
  STRATA_CHECK(il < layers_.size() && pos < n_ctx_, "KV write layer {} pos {} (n_ctx {})", il, pos, n_ctx_);
  Layer& l = layers_[il];
  const size_t slot = pos % l.capacity, w = l.shape.width;
  if (dtype_ == GgmlType::F32) {
    std::memcpy(reinterpret_cast<float*>(l.k.data()) + slot * w, k, w * 4);
    std::memcpy(reinterpret_cast<float*>(l.v.data()) + slot * w, v, w * 4);
  } else {
    auto* kd = reinterpret_cast<uint16_t*>(l.k.data()) + slot * w;
    auto* vd = reinterpret_cast<uint16_t*>(l.v.data()) + slot * w;
    for (size_t i = 0; i < w; ++i) {
      kd[i] = f32_to_f16(k[i]);
      vd[i] = f32_to_f16(v[i]);
    }
  }
}

void KvCache::set_n_tokens(uint32_t n) {
  STRATA_CHECK(n <= n_ctx_, "n_tokens {} > n_ctx {}", n, n_ctx_);
  n_tokens_ = n;
}

kernels::cpu::KvStore KvCache::view(uint32_t il) const {
  const Layer& l = layers_.at(il);
  return {l.k.data(), l.v.data(), dtype_, int64_t(l.capacity)};
}

}  // namespace strata::kv
