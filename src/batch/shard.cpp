#include "batch/shard.h"

#include <charconv>

namespace strata::batch {

uint64_t id_hash(std::string_view id) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a 64 offset basis
  for (unsigned char c : id) {
    h ^= c;
    h *= 0x100000001b3ull;  // FNV prime
  }
  // FNV's low bits mix poorly for short keys differing in their last byte; a final avalanche
  // (murmur3's fmix64) keeps `mod N` balanced for ids like doc-1, doc-2, ...
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 33;
  return h;
}

bool Shard::contains(std::string_view id) const { return id_hash(id) % count == index; }

Result<Shard> parse_shard(std::string_view text) {
  const auto bad = [&] {
    return Status::error("--shard '{}': expected i/N with 0 <= i < N (e.g. 0/4; Slurm: "
                         "$SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT with --array=0-3)",
                         text);
  };
  const size_t slash = text.find('/');
  if (slash == std::string_view::npos) return bad();
  const auto num = [](std::string_view s, uint32_t& out) {
    if (s.empty()) return false;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && p == s.data() + s.size();
  };
  Shard s;
  if (!num(text.substr(0, slash), s.index) || !num(text.substr(slash + 1), s.count)) return bad();
  if (s.count == 0 || s.count > 1000000 || s.index >= s.count) return bad();
  return s;
}

}  // namespace strata::batch
