#include "kernels/cpu/quant/iq_grid_search.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/quant/iq_grids.h"

namespace strata::kernels::cpu {
namespace {

// Element j of entry i of a grid, as its value.
float grid_value(GridKind kind, int i, int j) {
  switch (kind) {
    case GridKind::iq2xxs: return float(uint8_t(kIq2xxsGrid.v[i] >> (8 * j)));
    case GridKind::iq2xs: return float(uint8_t(kIq2xsGrid.v[i] >> (8 * j)));
    case GridKind::iq2s: return float(uint8_t(kIq2sGrid.v[i] >> (8 * j)));
    case GridKind::iq3xxs: return float(uint8_t(kIq3xxsGrid.v[i] >> (8 * j)));
    case GridKind::iq3s: return float(uint8_t(kIq3sGrid.v[i] >> (8 * j)));
    case GridKind::iq1s: return float(int8_t(uint8_t(kIq1sGrid.v[i] >> (8 * j))));
  }
  return 0.0f;
}

void shape_of(GridKind kind, int* n_entries, int* group) {
  switch (kind) {
    case GridKind::iq2xxs: *n_entries = 256, *group = 8; return;
    case GridKind::iq2xs: *n_entries = 512, *group = 8; return;
    case GridKind::iq2s: *n_entries = 1024, *group = 8; return;
    case GridKind::iq3xxs: *n_entries = 256, *group = 4; return;
    case GridKind::iq3s: *n_entries = 512, *group = 4; return;
    case GridKind::iq1s: *n_entries = 2048, *group = 8; return;
  }
}

inline int nearest_level(const GridIndex& g, float t) {
  int l = 0;
  while (l < g.n_levels - 1 && t > g.mids[l]) ++l;
  return l;
}

GridIndex build(GridKind kind) {
  GridIndex g;
  shape_of(kind, &g.n_entries, &g.group);
  g.values.resize(size_t(g.n_entries) * g.group);
  std::vector<float> distinct;
  for (int i = 0; i < g.n_entries; ++i) {
    for (int j = 0; j < g.group; ++j) {
      const float v = grid_value(kind, i, j);
      g.values[size_t(i) * g.group + j] = v;
      if (std::find(distinct.begin(), distinct.end(), v) == distinct.end()) distinct.push_back(v);
    }
  }
  std::sort(distinct.begin(), distinct.end());
  g.n_levels = int(distinct.size());
  for (int l = 0; l < g.n_levels; ++l) g.levels[l] = distinct[l];
  for (int l = 0; l + 1 < g.n_levels; ++l) g.mids[l] = 0.5f * (g.levels[l] + g.levels[l + 1]);

  // Level index of every element of every entry, and each entry's lattice key.
  std::vector<uint8_t> lev(g.values.size());
  for (size_t k = 0; k < g.values.size(); ++k)
    lev[k] = uint8_t(std::find(distinct.begin(), distinct.end(), g.values[k]) - distinct.begin());
  int n_keys = 1;
  for (int j = 0; j < g.group; ++j) n_keys *= g.n_levels;
  g.exact.assign(size_t(n_keys), -1);
  for (int i = 0; i < g.n_entries; ++i) {
    int key = 0;
    for (int j = g.group - 1; j >= 0; --j) key = key * g.n_levels + lev[size_t(i) * g.group + j];
    g.exact[size_t(key)] = i;
  }

  // Neighbours of every off-grid lattice point.
  g.nb_begin.assign(size_t(n_keys) + 1, 0);
  std::vector<int> dist(size_t(g.n_entries));
  std::vector<int> order;
  int pt[8];
  for (int key = 0; key < n_keys; ++key) {
    g.nb_begin[size_t(key)] = uint32_t(g.nb.size());
    if (g.exact[size_t(key)] >= 0) continue;
    for (int j = 0, k = key; j < g.group; ++j, k /= g.n_levels) pt[j] = k % g.n_levels;
    int dmin = 1 << 30;
    for (int i = 0; i < g.n_entries; ++i) {
      int d = 0;
      for (int j = 0; j < g.group; ++j) {
        const int e = pt[j] - lev[size_t(i) * g.group + j];
        d += e * e;
      }
      dist[size_t(i)] = d;
      dmin = std::min(dmin, d);
    }
    order.clear();
    for (int i = 0; i < g.n_entries; ++i)
      if (dist[size_t(i)] <= dmin + 1) order.push_back(i);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return dist[size_t(a)] < dist[size_t(b)]; });
    if (int(order.size()) > kMaxNeighbours) order.resize(kMaxNeighbours);
    for (const int i : order) g.nb.push_back(uint16_t(i));
  }
  g.nb_begin[size_t(n_keys)] = uint32_t(g.nb.size());
  return g;
}

}  // namespace

// Each grid's table is built on its first use (IQ1's, the largest, takes ~0.1 s).
template <GridKind kKind>
const GridIndex& index_of() {
  static const GridIndex kIndex = build(kKind);
  return kIndex;
}

const GridIndex& grid_index(GridKind kind) {
  switch (kind) {
    case GridKind::iq2xxs: return index_of<GridKind::iq2xxs>();
    case GridKind::iq2xs: return index_of<GridKind::iq2xs>();
    case GridKind::iq2s: return index_of<GridKind::iq2s>();
    case GridKind::iq3xxs: return index_of<GridKind::iq3xxs>();
    case GridKind::iq3s: return index_of<GridKind::iq3s>();
    case GridKind::iq1s: return index_of<GridKind::iq1s>();
  }
  return index_of<GridKind::iq2xxs>();
}

float entry_error(const GridIndex& g, int entry, const float* a, const float* w, float scale, float delta) {
  const float* v = g.values.data() + size_t(entry) * g.group;
  float e = 0;
  for (int j = 0; j < g.group; ++j) {
    const float r = a[j] - scale * (v[j] + delta);
    e += w[j] * r * r;
  }
  return e;
}

int best_entry(const GridIndex& g, const float* a, const float* w, float scale, float delta, float* err) {
  const float inv = 1.0f / scale;
  int key = 0;
  for (int j = g.group - 1; j >= 0; --j) key = key * g.n_levels + nearest_level(g, a[j] * inv - delta);
  const int on_grid = g.exact[size_t(key)];
  if (on_grid >= 0) {
    *err = entry_error(g, on_grid, a, w, scale, delta);
    return on_grid;
  }
  int best = -1;
  float best_err = 0;
  for (uint32_t k = g.nb_begin[size_t(key)]; k < g.nb_begin[size_t(key) + 1]; ++k) {
    const float e = entry_error(g, g.nb[k], a, w, scale, delta);
    if (best < 0 || e < best_err) {
      best = g.nb[k];
      best_err = e;
    }
  }
  *err = best_err;
  return best;
}

}  // namespace strata::kernels::cpu
