#include "kv/kv_cache.h"

#include <algorithm>

#include "core/kv_ring.h"
#include "core/units.h"
#include "kv/kv_quant.h"

namespace strata::kv {

Result<KvCache> KvCache::create(const std::vector<LayerShape>& layers, uint32_t n_ctx, uint32_t margin,
                                GgmlType k_type, GgmlType v_type) {
  if (n_ctx == 0) return Status::error("context length must be positive");
  KvCache c;
  c.n_ctx_ = n_ctx;
  c.k_type_ = k_type;
  c.v_type_ = v_type;
  for (const auto& shape : layers) {
    const uint32_t hd = shape.head_dim ? shape.head_dim : shape.width;
    if (Status s = check_kv_type(k_type, hd); !s) return Status::error("K: {}", s.message());
    if (Status s = check_kv_type(v_type, hd); !s) return Status::error("V: {}", s.message());
    if (hd == 0 || shape.width % hd != 0)
      return Status::error("KV row width {} is not a multiple of head_dim {}", shape.width, hd);
    Layer l;
    l.shape = shape;
    l.capacity = uint32_t(kv_ring_slots(shape.window, n_ctx, margin));
    const size_t kb = size_t(l.capacity) * kv_row_bytes(k_type, shape.width);
    const size_t vb = size_t(l.capacity) * kv_row_bytes(v_type, shape.width);
    try {
      l.k.resize(kb);
      l.v.resize(vb);
    } catch (const std::bad_alloc&) {
      return Status::error("cannot allocate the KV cache ({} per layer for {} tokens)", format_bytes(kb + vb), n_ctx);
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

size_t KvCache::k_row_bytes(uint32_t il) const { return kv_row_bytes(k_type_, layers_.at(il).shape.width); }
size_t KvCache::v_row_bytes(uint32_t il) const { return kv_row_bytes(v_type_, layers_.at(il).shape.width); }

const uint8_t* KvCache::k_row(uint32_t il, uint32_t pos) const {
  const Layer& l = layers_.at(il);
  return l.k.data() + size_t(kv_ring_slot(pos, l.capacity)) * k_row_bytes(il);
}

const uint8_t* KvCache::v_row(uint32_t il, uint32_t pos) const {
  const Layer& l = layers_.at(il);
  return l.v.data() + size_t(kv_ring_slot(pos, l.capacity)) * v_row_bytes(il);
}

void KvCache::write(uint32_t il, uint32_t pos, const float* k, const float* v) {
  STRATA_CHECK(il < layers_.size() && pos < n_ctx_, "KV write layer {} pos {} (n_ctx {})", il, pos, n_ctx_);
  Layer& l = layers_[il];
  const size_t slot = kv_ring_slot(pos, l.capacity);
  const uint32_t w = l.shape.width;
  kv_quantize_row(k_type_, k, l.k.data() + slot * kv_row_bytes(k_type_, w), w);
  kv_quantize_row(v_type_, v, l.v.data() + slot * kv_row_bytes(v_type_, w), w);
}

void KvCache::move_row(uint32_t il, uint32_t from, uint32_t to) {
  STRATA_CHECK(il < layers_.size() && from < n_ctx_ && to < n_ctx_, "KV move layer {} {} -> {} (n_ctx {})", il, from,
               to, n_ctx_);
  if (from == to) return;
  Layer& l = layers_[il];
  const size_t kb = k_row_bytes(il), vb = v_row_bytes(il);
  const size_t src = kv_ring_slot(from, l.capacity), dst = kv_ring_slot(to, l.capacity);
  std::copy_n(l.k.data() + src * kb, kb, l.k.data() + dst * kb);
  std::copy_n(l.v.data() + src * vb, vb, l.v.data() + dst * vb);
}

kernels::cpu::KvStore KvCache::view(uint32_t il) const {
  const Layer& l = layers_.at(il);
  return {l.k.data(), l.v.data(), k_type_, v_type_, int64_t(l.capacity)};
}

}  // namespace strata::kv
