#include "spec/replay.h"

#include <algorithm>

#include <fmt/format.h>

namespace strata::spec {
namespace {

// splitmix64: a position's outcome and wrong token, independent of the rounds' order.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

ReplayDrafter::ReplayDrafter(std::vector<int32_t> reference, double acceptance, uint64_t seed, uint32_t n_vocab,
                             std::unique_ptr<Drafter> cost)
    : ref_(std::move(reference)), acceptance_(std::clamp(acceptance, 0.0, 1.0)), seed_(seed),
      n_vocab_(std::max(2u, n_vocab)), cost_(std::move(cost)) {
  name_ = cost_ ? fmt::format("replay:a={:g}+{}", acceptance_, cost_->name()) : fmt::format("replay:a={:g}", acceptance_);
}

bool ReplayDrafter::right_at(size_t position) const {
  // 53 random bits as a uniform in [0, 1).
  const double u = double(mix(seed_ ^ mix(position)) >> 11) * 0x1.0p-53;
  return u < acceptance_;
}

Status ReplayDrafter::propose(std::span<const int32_t> history, uint32_t k, Draft& out) {
  out = Draft{};
  if (cost_) {
    STRATA_TRY(cost_->propose(history, k, out));
    out.tokens.clear();
    out.hidden.clear();
    out.verify_from = 0;
  }
  const size_t next = history.size();
  if (next == 0 || next > ref_.size() || !std::equal(history.begin(), history.end(), ref_.begin())) return {};
  for (size_t p = next; p < std::min(ref_.size(), next + k); ++p) {
    const int32_t right = ref_[p];
    if (right_at(p)) {
      out.tokens.push_back(right);
    } else {
      // Any other token, picked by the position's hash (never the right one).
      const uint32_t offset = 1 + uint32_t(mix((seed_ + 0x5eed) ^ mix(p)) % (n_vocab_ - 1));
      out.tokens.push_back(int32_t((uint32_t(right) + offset) % n_vocab_));
    }
  }
  return {};
}

}  // namespace strata::spec
