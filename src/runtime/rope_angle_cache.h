// RoPE angle tables of the last few (position, base) pairs a CPU pass used (kernels/cpu/ops.h
// rope_angles): a decode step rotates Q and K of every layer at one position, and the layers of one
// RoPE base (gemma3: every sliding layer) share one table, so the step computes a table per base
// instead of two per layer (each table is head_dim / 2 pows, cosines and sines in double: that was
// most of RoPE's time, a serial piece of every layer). The same function on the same arguments:
// the rotation is bit for bit what rope_heads computes.
// Not thread-safe; owned by one pass (CpuOps), so nothing outlives the pass's frequency factors.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "kernels/cpu/ops.h"

namespace strata::runtime {

class RopeAngleCache {
 public:
  // (cos, sin) of every pair for this key (kernels::cpu::rope_angles' layout), computed on a miss.
  // The pointer is valid until the next call.
  const float* angles(int64_t head_dim, float pos, float base, const float* freq_div) {
    for (Entry& e : entries_)
      if (e.valid && e.pos == pos && e.base == base && e.head_dim == head_dim && e.freq_div == freq_div)
        return e.cos_sin.data();
    Entry& e = entries_[next_];
    next_ = (next_ + 1) % entries_.size();
    e.valid = true, e.pos = pos, e.base = base, e.head_dim = head_dim, e.freq_div = freq_div;
    e.cos_sin.resize(size_t(head_dim));
    kernels::cpu::rope_angles(e.cos_sin.data(), head_dim, pos, base, freq_div);
    return e.cos_sin.data();
  }

 private:
  struct Entry {
    bool valid = false;
    float pos = 0, base = 0;
    int64_t head_dim = 0;
    const float* freq_div = nullptr;  // the model's factors (by address: fixed for a pass)
    std::vector<float> cos_sin;
  };
  // Bases per model: one or two (gemma3's sliding and global layers); a few more cost nothing.
  std::array<Entry, 4> entries_{};
  size_t next_ = 0;
};

}  // namespace strata::runtime
