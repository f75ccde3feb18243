#include "offload/vram_arena.h"

#include <algorithm>

#include "core/units.h"
#include "kernels/cuda/cuda_api.h"

namespace strata::offload {

namespace cuda = kernels::cuda;

VramArena::~VramArena() {
  for (void* p : blocks_) cuda::device_free(p);
}

Result<void*> VramArena::alloc(uint64_t bytes, const std::string& what) {
  // 256-byte granules: what cudaMalloc aligns to anyway, counted so the budget is honest.
  const uint64_t charged = std::max<uint64_t>(256, (bytes + 255) / 256 * 256);
  if (budget_ && used_ + charged > budget_)
    return Status::error("VRAM budget {} exceeded: {} for {} does not fit ({} already allocated)",
                         format_bytes(budget_), format_bytes(charged), what, format_bytes(used_));
  auto p = cuda::device_alloc(charged);
  if (!p)
    return Status::error("cannot allocate {} of VRAM for {} ({} already allocated): {}", format_bytes(charged), what,
                         format_bytes(used_), p.message());
  blocks_.push_back(*p);
  used_ += charged;
  peak_ = std::max(peak_, used_);
  const std::string purpose = what.substr(0, what.find(' '));
  auto it = std::find_if(by_purpose_.begin(), by_purpose_.end(), [&](const auto& e) { return e.first == purpose; });
  if (it == by_purpose_.end()) by_purpose_.emplace_back(purpose, charged);
  else it->second += charged;
  return p;
}

}  // namespace strata::offload
