// HardwareProfile: what a machine offers the planner — tier capacities and transfer/compute rates —
// each number with where it came from (`measured` on a date and machine, or `datasheet` with a
// source). Loaded from and saved to TOML (configs/hw/*.toml); `strata probe` writes one.
//
// TOML schema (every number is an inline table carrying its provenance):
//   name = "rtx3060-12g"            description = "..."
//   [capacity]
//   vram_budget   = { bytes = "12GiB",  provenance = "datasheet", source = "NVIDIA RTX 3060 12 GB" }
//   pinned_budget = { bytes = "24GiB",  ... }   # page-locked host RAM the engine may pin
//   host_ram      = { bytes = "32GiB",  ... }   # all host RAM the engine may use (pinned included)
//   nvme_budget   = { bytes = "200GiB", ... }   nvme_path = "/var/tmp"
//   cuda_context  = { bytes = "400MiB", ... }   # VRAM the driver/context takes before any allocation
//   [rates]   (GB/s = 1e9 bytes/s)
//   device_read = { gbps = 360, ... }           gpu_gemm = { tflops = 50, ... }
//   h2d_pinned  = [ { chunk = "1MiB", gbps = 20, ... }, ... ]   # pinned host -> VRAM by copy size
//   nvme_read   = [ { qd = 1, gbps = 1.5, ... }, ... ]           # O_DIRECT reads by queue depth
//   host_read   = [ { threads = 1, gbps = 15, ... }, ... ]       # host memory read by threads
//   cpu_gemv    = [ { type = "q4_K", gbps = 12, ... }, ... ]     # GB/s of weights, all threads
//   cpu_gemv_q8 = [ { type = "q4_K", threads = 16, cols = 1, gbps = 70, ... }, ... ]  # optional
//       # the int8-activation GEMV (kernels/cpu/gemv_q8.h): GB/s of weights for a matmul of `cols`
//       # activation columns on `threads` threads (activation quantisation included)
// Provenance: provenance = "measured" needs date + machine; "datasheet" needs source.
// A machine without a GPU has vram_budget = 0 (device_read/gpu_gemm may then be 0).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/ggml_type.h"
#include "core/status.h"

namespace strata::offload {

struct Provenance {
  enum class Kind { measured, datasheet } kind = Kind::datasheet;
  std::string date, machine;  // measured
  std::string source;         // datasheet
  static Provenance measured_on(std::string date, std::string machine) {
    return {Kind::measured, std::move(date), std::move(machine), {}};
  }
  static Provenance datasheet(std::string source) { return {Kind::datasheet, {}, {}, std::move(source)}; }
};

struct Bytes { uint64_t bytes = 0; Provenance prov; };
struct Rate { double value = 0; Provenance prov; };  // GB/s or TFLOP/s, per field
struct RatePoint { uint64_t key = 0; double gbps = 0; Provenance prov; };  // key: chunk bytes / qd / threads
struct GemvRate { GgmlType type = GgmlType::F32; double gbps = 0; Provenance prov; };
struct GemvQ8Rate {
  GgmlType type = GgmlType::F32;
  uint32_t threads = 0, cols = 0;
  double gbps = 0;  // weight bytes / the matmul's time (all cols columns)
  Provenance prov;
};

struct HardwareProfile {
  std::string name, description;
  // capacities
  Bytes vram_budget, pinned_budget, host_ram, nvme_budget, cuda_context;
  std::string nvme_path;
  // rates
  Rate device_read_gbps, gpu_gemm_tflops;
  std::vector<RatePoint> h2d_pinned;  // key = chunk bytes, ascending
  std::vector<RatePoint> nvme_read;   // key = queue depth, ascending
  std::vector<RatePoint> host_read;   // key = threads, ascending
  std::vector<GemvRate> cpu_gemv;
  std::vector<GemvQ8Rate> cpu_gemv_q8;  // may be empty (profiles from before strata probe measured it)

  bool has_gpu() const { return vram_budget.bytes > 0; }
  // Derived figures the cost model uses (GB/s).
  double h2d_gbps(uint64_t chunk_bytes) const;  // interpolated in log(chunk); 0 when none
  double nvme_gbps() const;                     // best over queue depths
  double host_gbps() const;                     // best over thread counts
  double cpu_gemv_gbps(GgmlType type) const;    // the type's rate; else the slowest listed rate
  // GB/s of weights of the int8-activation GEMV of `cols` columns for the type, at the most threads
  // measured (the engine's matmuls use every thread): the time per matmul interpolated linearly in
  // cols between the measured column counts (extrapolated along the last two past the largest;
  // the one count's time times cols when only one is measured). 0 when the type has no entry.
  double cpu_gemv_q8_gbps(GgmlType type, uint32_t cols) const;
};

Result<HardwareProfile> parse_profile(const std::string& toml_text, const std::string& origin);
Result<HardwareProfile> load_profile(const std::string& path);
std::string profile_to_toml(const HardwareProfile& p);
Status save_profile(const HardwareProfile& p, const std::string& path);
// Checks ranges (no negative rate, pinned <= host, sorted tables); parse_profile calls it.
Status validate_profile(const HardwareProfile& p);

}  // namespace strata::offload
