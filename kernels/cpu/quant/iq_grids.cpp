// The i-quant grid tables of iq_grids.h, expanded at compile time from the packed form in
// iq_grids_packed.h (source named there; the CUDA tables expand the same data).
// tests/kernels/test_iq_grids.cpp checks entries against ggml-common.h's values and the whole tables
// through the testdata decode.
//
// Compile-time checks catch a mistyped digit: the length of each string, every field within its
// level list, and the indices strictly increasing (ggml builds each grid from a sorted index list).
#include "kernels/cpu/quant/iq_grids.h"

#include "kernels/cpu/quant/iq_grids_packed.h"

namespace strata::kernels::cpu {
namespace {
using namespace iq_packed;  // the packed strings and their checks
static_assert(sizeof(kIq2xxsHex) == 256 * 4 + 1 && hex_ok(kIq2xxsHex, 256, 2, 3));
static_assert(sizeof(kIq2xsHex) == 512 * 4 + 1 && hex_ok(kIq2xsHex, 512, 2, 3));
static_assert(sizeof(kIq2sHex) == 1024 * 4 + 1 && hex_ok(kIq2sHex, 1024, 2, 3));
static_assert(sizeof(kIq3xxsHex) == 256 * 4 + 1 && hex_ok(kIq3xxsHex, 256, 4, 8));
static_assert(sizeof(kIq3sHex) == 512 * 4 + 1 && hex_ok(kIq3sHex, 512, 4, 8));
static_assert(sizeof(kIq1sHex) == 2048 * 4 + 1 && hex_ok(kIq1sHex, 2048, 2, 3));
}  // namespace

// The exported tables (declared extern in iq_grids.h, so these constexpr definitions have external
// linkage); constant-initialised, so they are ready before any static constructor runs.
constexpr GridTable<uint64_t, 256> kIq2xxsGrid = iq_packed::iq2xxs_grid();
constexpr GridTable<uint64_t, 512> kIq2xsGrid = iq_packed::iq2xs_grid();
constexpr GridTable<uint64_t, 1024> kIq2sGrid = iq_packed::iq2s_grid();
constexpr GridTable<uint32_t, 256> kIq3xxsGrid = iq_packed::iq3xxs_grid();
constexpr GridTable<uint32_t, 512> kIq3sGrid = iq_packed::iq3s_grid();
constexpr GridTable<uint64_t, 2048> kIq1sGrid = iq_packed::iq1s_grid();

constexpr GridTable<uint8_t, 128> kKsignsIq2xs = iq_packed::make_ksigns();

// Spot values of ggml-common.h (first and last entries): a wrong level list or byte order fails here.
static_assert(kIq2xxsGrid.v[0] == 0x0808080808080808ull && kIq2xxsGrid.v[1] == 0x080808080808082bull);
static_assert(kIq3xxsGrid.v[1] == 0x04040414u && kIq3sGrid.v[0] == 0x01010101u);
static_assert(kIq1sGrid.v[0] == 0xffffffffffffffffull && kIq1sGrid.v[2047] == 0x0101010101010101ull);

// ggml's table starts 0, 129, 130, 3, 132 and ends 252, 125, 126, 255.
static_assert(kKsignsIq2xs.v[1] == 129 && kKsignsIq2xs.v[2] == 130 && kKsignsIq2xs.v[3] == 3 && kKsignsIq2xs.v[127] == 255 &&
              kKsignsIq2xs.v[124] == 252);

}  // namespace strata::kernels::cpu
