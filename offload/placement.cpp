#include "offload/placement.h"

#include <algorithm>

namespace strata::offload {

const char* tier_name(Tier t) {
  switch (t) {
    case Tier::gpu: return "gpu";
    case Tier::stream: return "stream";
    case Tier::disk: return "disk";
    case Tier::cpu: return "cpu";
  }
  return "?";
}
const char* kv_tier_name(KvTier t) { return t == KvTier::gpu ? "gpu" : "host"; }

bool Placement::any(Tier t) const {
  return head == t || std::find(attention.begin(), attention.end(), t) != attention.end() ||
         std::find(ffn.begin(), ffn.end(), t) != ffn.end();
}

uint32_t Placement::n_kv_host() const { return uint32_t(std::count(kv.begin(), kv.end(), KvTier::host)); }

Status Placement::check(uint32_t n_layer) const {
  auto ok = [&](size_t n) { return n == 0 || n == n_layer; };
  if (!ok(attention.size()) || !ok(ffn.size()) || !ok(kv.size()))
    return Status::error("placement has {} attention, {} ffn and {} KV entries: one per layer ({}) expected",
                         attention.size(), ffn.size(), kv.size(), n_layer);
  return Status::ok();
}

}  // namespace strata::offload
