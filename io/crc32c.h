// CRC-32C (Castagnoli), the checksum behind `--verify`: block checksums are computed by strata
// itself (at load, or recorded in a sidecar) and compared after every read. CRC-32C because x86
// has an instruction for it (SSE4.2, ~10+ GB/s per core, faster than the disk), with a portable
// table-driven path for other CPUs; both give the same value (tested).
#pragma once

#include <cstdint>
#include <span>

namespace strata::io {

// Chainable: crc32c(b, crc32c(a)) == crc32c(a ++ b). crc32c("123456789") == 0xE3069283.
uint32_t crc32c(std::span<const uint8_t> data, uint32_t crc = 0);
// The portable path alone (tests compare it with the dispatched one).
uint32_t crc32c_portable(std::span<const uint8_t> data, uint32_t crc = 0);

}  // namespace strata::io
