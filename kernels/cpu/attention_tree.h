// Attention with a token-tree visibility mask (M12's verification of a drafted tree) on the CPU:
// kernels/cpu/attention.h's causal / window semantics, and within them the tree's.
#pragma once

#include <cstdint>

#include "kernels/cpu/attention.h"

namespace strata::kernels::cpu {

// The k <= 64 new tokens of a call are keys first .. first + k - 1; query i sees, of the keys its
// causal / window range allows, those before `first` and the new key first + j where bit j of
// bits[i] is set (keys from first + 64 on: never).
struct TreeMask {
  const uint64_t* bits = nullptr;  // n_q words
  int32_t first = 0;
};

// As attention() (a null tree.bits: the same call), with the tree's visibility.
void attention_tree(const float* q, const int32_t* pos, int64_t n_q, const KvStore& kv, const AttentionShape& s,
                    const TreeMask& tree, float* out);

}  // namespace strata::kernels::cpu
