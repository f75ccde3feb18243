// The run-time choice of the IQ3 kernels' grid load (dot_q8.h: GridLoad, iq3_grid_load).
//
// Why at run time, by measurement: the two ways trade places across CPUs. vpgatherdd is a few
// uops on recent Intel cores (one Emerald Rapids core: the gathers took half the time of eight
// scalar loads into vpinsrd), but about 8 cycles each on AMD Zen 5, where eight scalar-indexed
// loads blended into place decode an IQ3_XXS super-block in about two thirds of the time
// (dot_q8_x86.inc, direct4).
// A vendor or model table would have to be kept up to date and would still miss VMs that hide
// the model; one short timing of both on the CPU itself does not. Both kernels return the same
// bits, so the pick changes speed only, never results.
//
// The timing: both rows kernels of best_dot_q8_isa's build, one column, on 8 cache-resident rows
// of 2048 elements (about 6-7 KiB: the decode, not DRAM, is what differs), alternated in short
// rounds so a clock ramp or a neighbour on the core hits both alike; the best round of each
// counts. Well under 1 ms per type (~0.3 ms here), once per process, on the thread that first asks.
//
// Measured on one Zen 5 core of a 2-core VM shared with other work, `strata bench cpu-kernels
// --types iq3_xxs,iq3_s --cols 1,8 --threads 1` (AVX-512 VNNI build; host read 29-33 GB/s), best
// of 3 runs, GB/s of weights at 1 / 8 columns on the 27B ffn_up shape (small shape):
//   iq3_xxs  gather 4.9 / 3.3 (5.2 / 3.3)  ->  direct 7.1 / 4.3 (6.9 / 4.5)
//   iq3_s    gather 5.4 / 4.0 (5.6 / 3.9)  ->  direct 5.6 / 4.2 (5.5 / 4.2)
// The pick's own timing there: iq3_xxs gather 20, direct 13 ns per super-block row (direct);
// iq3_s about even, 20.6 / 20.6 (either; its 9-bit indices cost the direct loads their gain,
// dot_q8_x86.inc). Both types stay compute-bound on this core (about a sixth to a quarter of the
// read rate at one column).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include "kernels/cpu/dot_q8.h"
#include "kernels/cpu/q8_act.h"

namespace strata::kernels::cpu {
namespace {

constexpr int64_t kPickN = 2048;     // elements per row
constexpr int kPickRows = kQ8MaxRows;
constexpr int kPickRounds = 12;      // per grid load
constexpr int kPickCallsPerRound = 8;

// ns per super-block row of fn over rows (kPickRows rows of kPickN at row_bytes), one round.
double round_ns(DotQ8RowsFn fn, const uint8_t* rows, int64_t row_bytes, const Q8ActView& x, float* y) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kPickCallsPerRound; ++i) fn(rows, row_bytes, kPickRows, x, y, kPickRows);
  const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
  return ns / (kPickCallsPerRound * kPickRows * (kPickN / 256));
}

GridLoadPick measure(GgmlType type, Q8Isa isa) {
  const int64_t row_bytes = int64_t(ggml_row_bytes(type, uint64_t(kPickN)));
  // Pseudo-random bytes: every byte pattern is a valid IQ3 block (all indices are in range); the
  // f16 d (the first field of both blocks) set to 1 so the sums stay finite.
  std::vector<uint8_t> rows(size_t(row_bytes * kPickRows));
  uint32_t s = 0x9e3779b9u;
  for (uint8_t& b : rows) {
    s = s * 1664525u + 1013904223u;
    b = uint8_t(s >> 24);
  }
  const size_t block_bytes = ggml_type_info(type).type_size;
  for (size_t off = 0; off < rows.size(); off += block_bytes) {
    const uint16_t one = 0x3c00;
    std::memcpy(rows.data() + off, &one, sizeof one);
  }
  std::vector<float> xf(static_cast<size_t>(kPickN));
  for (size_t i = 0; i < xf.size(); ++i) xf[i] = float(int(i * 37 % 255) - 127);
  std::vector<uint8_t> xbuf(q8_act_bytes(kPickN, 1) + 64);
  void* aligned = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(xbuf.data()) + 63) / 64 * 64);
  const Q8ActView x = quantize_q8_act(xf.data(), kPickN, 1, aligned);
  float y[kPickRows];

  const DotQ8RowsFn fn[kGridLoadCount] = {dot_q8_rows_kernel(type, isa, GridLoad::gather),
                                          dot_q8_rows_kernel(type, isa, GridLoad::direct)};
  double best[kGridLoadCount] = {1e30, 1e30};
  for (int l = 0; l < kGridLoadCount; ++l) round_ns(fn[l], rows.data(), row_bytes, x, y);  // warm-up
  for (int r = 0; r < kPickRounds; ++r)
    for (int l = 0; l < kGridLoadCount; ++l)
      best[l] = std::min(best[l], round_ns(fn[l], rows.data(), row_bytes, x, y));
  GridLoadPick p;
  p.gather_ns = best[0], p.direct_ns = best[1];
  p.load = best[1] < best[0] ? GridLoad::direct : GridLoad::gather;
  return p;
}

GridLoadPick pick(GgmlType type) {
  GridLoadPick p;
  const Q8Isa isa = best_dot_q8_isa(type);
  if (isa == Q8Isa::scalar) return p;  // no grid loads to choose between
  // STRATA_IQ3_GRID=gather|direct (tests, benchmarks); any other value is ignored.
  if (const char* env = std::getenv("STRATA_IQ3_GRID")) {
    const std::string_view v(env);
    if (v == "gather" || v == "direct") {
      p.load = v == "direct" ? GridLoad::direct : GridLoad::gather;
      p.from_env = true;
      return p;
    }
  }
  return measure(type, isa);
}

}  // namespace

GridLoadPick iq3_grid_pick(GgmlType type) {
  // One pick per type, made on first use (thread-safe static initialisation).
  switch (type) {
    case GgmlType::IQ3_XXS: {
      static const GridLoadPick p = pick(type);
      return p;
    }
    case GgmlType::IQ3_S: {
      static const GridLoadPick p = pick(type);
      return p;
    }
    default: return {};
  }
}

GridLoad iq3_grid_load(GgmlType type) { return iq3_grid_pick(type).load; }

}  // namespace strata::kernels::cpu
