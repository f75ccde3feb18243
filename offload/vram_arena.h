// VramArena: every device allocation of an engine goes through it, so the VRAM budget is a hard
// limit checked at allocation time ("--vram 12GiB" means the engine never holds more), and the
// peak is known exactly (what strata allocated, not what nvidia-smi shows for the whole card).
//
// Allocations are individual cudaMallocs (weights, KV, ring slots, scratch live for the engine's
// lifetime, so there is no fragmentation to manage); the arena owns them and frees them all on
// destruction. Not thread-safe: one engine, one thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace strata::offload {

class VramArena {
 public:
  // budget 0: no limit beyond what the device has.
  explicit VramArena(uint64_t budget) : budget_(budget) {}
  ~VramArena();
  VramArena(const VramArena&) = delete;
  VramArena& operator=(const VramArena&) = delete;

  // Error names `what`, the size, the budget and what is already in use.
  Result<void*> alloc(uint64_t bytes, const std::string& what);

  uint64_t budget() const { return budget_; }
  uint64_t used() const { return used_; }
  uint64_t peak() const { return peak_; }
  // Bytes per purpose label prefix (the text before the first space), for the report.
  const std::vector<std::pair<std::string, uint64_t>>& by_purpose() const { return by_purpose_; }

 private:
  uint64_t budget_ = 0, used_ = 0, peak_ = 0;
  std::vector<void*> blocks_;
  std::vector<std::pair<std::string, uint64_t>> by_purpose_;
};

}  // namespace strata::offload
