// The search primitive of the grid i-quant quantisers: for a group of 8 (or 4) target values, the
// grid entry whose scaled values are nearest under a weighted squared error.
//
// Every grid is a subset of a lattice: each element takes one of a few levels ({8, 25, 43} for
// the IQ2 grids, eight levels for the IQ3 grids, {-1, 0, 1} for IQ1). The error is separable per
// element, so the best lattice point for a scale is "each element to its nearest level"; when that
// point is a grid entry it is the best entry. Otherwise the best entry is searched among that
// lattice point's neighbours: the grid entries nearest to it in level steps (squared distance up
// to the minimum + 1, at most kMaxNeighbours), precomputed once per grid. (The method is the one
// ggml uses; the tables here are computed by strata from the grids of iq_grids.h.)
//
// Thread-safety: grid_index() builds its table once (a function-local static) and returns it
// const; the search functions are pure.
#pragma once

#include <cstdint>
#include <vector>

namespace strata::kernels::cpu {

enum class GridKind : int { iq2xxs, iq2xs, iq2s, iq3xxs, iq3s, iq1s };

struct GridIndex {
  int group = 0;      // elements per entry: 8, or 4 for the IQ3 grids
  int n_entries = 0;
  int n_levels = 0;   // distinct element values
  float levels[8] = {};      // ascending
  float mids[7] = {};        // midpoints between consecutive levels
  std::vector<float> values;         // [n_entries][group] element values
  std::vector<int32_t> exact;        // lattice key -> entry, or -1 where the point is not on the grid
  std::vector<uint32_t> nb_begin;    // lattice key -> first neighbour in nb (n_keys + 1 offsets)
  std::vector<uint16_t> nb;          // neighbour entries, nearest first
  float max_level() const { return levels[n_levels - 1]; }
};

inline constexpr int kMaxNeighbours = 48;

const GridIndex& grid_index(GridKind kind);

// The entry minimising sum_j w[j] * (a[j] - scale * (v[j] + delta))^2 over the lattice point's
// neighbours (exact when the nearest lattice point is on the grid); scale > 0. Writes the error.
int best_entry(const GridIndex& g, const float* a, const float* w, float scale, float delta, float* err);

// sum_j w[j] * (a[j] - scale * (v[j] + delta))^2 for one entry.
float entry_error(const GridIndex& g, int entry, const float* a, const float* w, float scale, float delta);

}  // namespace strata::kernels::cpu
