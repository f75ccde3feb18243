// Importance matrices: per weight matrix, the sum over the calibration tokens of the squared
// activation of each input column (the weight's importance), in llama.cpp's GGUF imatrix format so
// that files are interchangeable with llama-imatrix / llama-quantize:
//   metadata  general.type = "imatrix", imatrix.datasets (array of strings: the calibration
//             files), imatrix.chunk_count (u32: chunks evaluated), imatrix.chunk_size (u32: tokens
//             per chunk);
//   tensors   "<weight name>.in_sum2"  F32 [n_in, n_mat]: sum of x^2 per input column;
//             "<weight name>.counts"   F32 [1, n_mat]: activation rows summed (n_mat = 1 for a
//             dense matrix; llama.cpp keeps one per expert of a MoE tensor).
// The importance strata's quantisers use is the mean in_sum2 / counts (per expert).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"

namespace strata::model {

struct ImatrixEntry {
  uint64_t n_in = 0;
  uint64_t n_mat = 1;
  std::vector<float> sum2;    // [n_mat][n_in]
  std::vector<float> counts;  // [n_mat]
};

struct Imatrix {
  std::vector<std::string> datasets;
  uint32_t chunk_count = 0;
  uint32_t chunk_size = 0;
  std::map<std::string, ImatrixEntry> entries;  // by weight tensor name: "blk.0.attn_q.weight"

  // The mean squared activation per column of matrix `mat` of a weight (sum2 / count), or an
  // empty vector when the file has no entry or no counted row for it.
  std::vector<float> importance(const std::string& weight, uint64_t mat = 0) const;
};

// Errors name the file: not GGUF, general.type present and not "imatrix", an in_sum2 without its
// counts (or shapes that disagree), a non-F32 tensor, negative or non-finite values.
Result<Imatrix> read_imatrix(const std::string& path);
Status write_imatrix(const Imatrix& m, const std::string& path);

}  // namespace strata::model
