#include "offload/pinned_pool.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/units.h"
#include "io/aligned_buffer.h"

namespace strata::offload {

namespace cuda = kernels::cuda;

namespace {
uint32_t g_pinned_failure_countdown = 0;  // inject_pinned_alloc_failure: allocations left until the refusal
}  // namespace

void inject_pinned_alloc_failure(uint32_t nth) { g_pinned_failure_countdown = nth; }

PinnedPool::~PinnedPool() {
  for (const auto& a : live_) cuda::pinned_free(a.raw);
}

Result<uint8_t*> PinnedPool::alloc(uint64_t bytes, std::string_view what, bool page_aligned) {
  const uint64_t counted = bytes + (page_aligned ? io::kDirectAlign : 0);
  if (budget_ && used_ + counted > budget_)
    return Status::error("pinned-RAM budget {} exceeded: {} needs {} beside the {} pinned already",
                         format_bytes(budget_), what, format_bytes(counted), format_bytes(used_));
  if (g_pinned_failure_countdown > 0 && --g_pinned_failure_countdown == 0)
    return Status::error("cannot pin {} of host RAM for {}: pinned_alloc {} bytes: refused (failure injected by "
                         "inject_pinned_alloc_failure)", format_bytes(counted), what, counted);
  auto p = cuda::pinned_alloc(counted);
  if (!p) return Status::error("cannot pin {} of host RAM for {}: {}", format_bytes(counted), what, p.message());
  auto* base = static_cast<uint8_t*>(*p);
  if (page_aligned) base = reinterpret_cast<uint8_t*>(io::align_up(reinterpret_cast<uintptr_t>(*p)));
  Allocation a{*p, base, counted};
  live_.push_back(a);
  used_ += counted;
  peak_ = std::max(peak_, used_);
  return a.base;
}

void PinnedPool::release(uint8_t* p) {
  if (!p) return;
  auto it = std::find_if(live_.begin(), live_.end(), [&](const Allocation& a) { return a.base == p; });
  if (it == live_.end()) return;
  cuda::pinned_free(it->raw);
  used_ -= it->bytes;
  live_.erase(it);
}

Result<std::unique_ptr<BounceRing>> BounceRing::create(PinnedPool& pool, uint32_t n, uint64_t bytes,
                                                       std::string_view what) {
  std::unique_ptr<BounceRing> r(new BounceRing(pool, bytes));
  for (uint32_t i = 0; i < n; ++i) {
    auto p = pool.alloc(bytes, fmt::format("{} (bounce buffer {} of {})", what, i + 1, n));
    if (!p) return p.status();
    r->buf_.push_back({*p, nullptr, false});
    auto e = cuda::event_create();
    if (!e) return e.status();
    r->buf_.back().copied = *e;
  }
  return r;
}

BounceRing::~BounceRing() {
  for (auto& b : buf_) {
    if (b.copied) {
      if (b.busy) (void)cuda::event_synchronize(b.copied);
      cuda::event_destroy(b.copied);
    }
    pool_.release(b.base);
  }
}

Result<uint8_t*> BounceRing::acquire() {
  Buffer& b = buf_[uses_ % buf_.size()];
  if (b.busy) STRATA_TRY(cuda::event_synchronize(b.copied));
  b.busy = false;
  return b.base;
}

Status BounceRing::copies_enqueued(cuda::Stream s) {
  Buffer& b = buf_[uses_ % buf_.size()];
  STRATA_TRY(cuda::event_record(b.copied, s));
  b.busy = true;
  ++uses_;
  return Status::ok();
}

Result<bool> BounceRing::copied(uint64_t i) const {
  const Buffer& b = buf_[i % buf_.size()];
  if (!b.busy) return true;
  return cuda::event_done(b.copied);
}

Status BounceRing::wait_copied(uint64_t i) const {
  const Buffer& b = buf_[i % buf_.size()];
  return b.busy ? cuda::event_synchronize(b.copied) : Status::ok();
}

Status BounceRing::copies_enqueued(uint64_t i, cuda::Stream s) {
  Buffer& b = buf_[i % buf_.size()];
  STRATA_TRY(cuda::event_record(b.copied, s));
  b.busy = true;
  return Status::ok();
}

std::vector<std::span<uint8_t>> BounceRing::buffers() const {
  std::vector<std::span<uint8_t>> v;
  for (const auto& b : buf_) v.push_back({b.base, bytes_});
  return v;
}

}  // namespace strata::offload
