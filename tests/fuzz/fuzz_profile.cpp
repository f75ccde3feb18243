// Fuzz target: the TOML hardware-profile parser (configs/hw/*.toml, `--hw FILE`). Whatever
// parses must pass validate_profile and survive the derived figures the cost model asks for,
// and its TOML form must parse back.
#include <cstddef>
#include <cstdint>
#include <string>

#include "offload/hardware_profile.h"

using namespace strata;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto p = offload::parse_profile(text, "fuzz.toml");
  if (!p.is_ok()) return 0;
  if (!offload::validate_profile(*p).is_ok()) __builtin_trap();
  double sink = p->h2d_gbps(1) + p->h2d_gbps(1u << 20) + p->h2d_gbps(uint64_t(1) << 40) + p->nvme_gbps() +
                p->host_gbps() + p->cpu_gemv_gbps(GgmlType::Q4_K);
  // save -> load round trip: a profile strata accepted, it must be able to write back.
  auto again = offload::parse_profile(offload::profile_to_toml(*p), "roundtrip.toml");
  if (!again.is_ok()) __builtin_trap();
  return sink < -1 ? 1 : 0;
}
