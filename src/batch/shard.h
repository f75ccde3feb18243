// --shard i/N: which jobs this process runs when a scheduler starts N copies (Slurm job arrays,
// Kubernetes Indexed Jobs). A job belongs to shard hash(id) mod N — not to a range of line numbers,
// so adding or reordering lines does not move other jobs between shards, and every copy computes
// the same partition without talking to the others. The hash is FNV-1a 64 over the id's bytes:
// fixed, so it is the same on every machine and every build.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace strata::batch {

struct Shard {
  uint32_t index = 0;  // 0-based, < count
  uint32_t count = 1;
  bool contains(std::string_view id) const;
};

uint64_t id_hash(std::string_view id);
// "i/N" with 0 <= i < N (both decimal); N up to 1,000,000.
Result<Shard> parse_shard(std::string_view text);

}  // namespace strata::batch
