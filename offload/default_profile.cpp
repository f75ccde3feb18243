#include "offload/default_profile.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <tbb/task_arena.h>

#include "core/units.h"
#include "kernels/cuda/device_info.h"
#include "kernels/cpu/memory_bandwidth.h"
#include "kernels/cuda/read_probe.h"
#include "offload/probe.h"

namespace strata::offload {
namespace {

// The last-level cache all threads together hold: one instance's size times the instances (Linux
// sysfs: cpu0's deepest cache and the CPUs sharing it); sysconf's figure where sysfs says nothing
// (in a VM it may be the host's whole L3, larger than the guest's: 320 MiB against 32 here).
uint64_t last_level_cache_bytes(uint64_t threads) {
  for (int index = 4; index >= 2; --index) {
    const std::string dir = fmt::format("/sys/devices/system/cpu/cpu0/cache/index{}/", index);
    std::ifstream size_file(dir + "size"), shared_file(dir + "shared_cpu_list");
    uint64_t kib = 0;
    char unit = 0;
    if (!(size_file >> kib >> unit) || unit != 'K' || kib == 0) continue;
    // "0-1", "0,8", "0-3,64-67": count the CPUs sharing it.
    std::string list;
    uint64_t shared = 0;
    if (shared_file >> list) {
      std::stringstream ss(list);
      for (std::string part; std::getline(ss, part, ',');) {
        uint64_t a = 0, b = 0;
        const char* end = part.data() + part.size();
        auto r = std::from_chars(part.data(), end, a);
        b = a;
        if (r.ec == std::errc() && r.ptr != end && *r.ptr == '-') r = std::from_chars(r.ptr + 1, end, b);
        if (r.ec == std::errc() && b >= a) shared += b - a + 1;
      }
    }
    const uint64_t instances = shared ? (threads + shared - 1) / shared : 1;
    return kib * 1024 * instances;
  }
  const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  return l3 > 0 ? uint64_t(l3) : 0;
}

QuickCpuRates measure_quick_cpu_rates() {
  const int hw = int(std::max(1u, std::thread::hardware_concurrency()));
  QuickCpuRates q;
  // Beyond the last-level cache, or the read measures the cache.
  const uint64_t buf = std::clamp<uint64_t>(2 * last_level_cache_bytes(uint64_t(hw)), 64 * kMiB, 1 * kGiB);
  const auto quick = Provenance::measured_on(
      "now", fmt::format("this machine: a quick check at start-up, a {} matrix per type, beyond the last-level "
                         "cache (`strata probe` measures more)", format_bytes(buf)));
  tbb::task_arena arena(hw);
  double read = 0;
  arena.execute([&] { read = kernels::cpu::measure_read_bandwidth(buf, 2); });
  if (read > 0) q.host_read.push_back({uint64_t(hw), read, quick});
  const std::vector<GgmlType> types{GgmlType::Q3_K, GgmlType::Q4_K,   GgmlType::Q5_K,    GgmlType::Q6_K,
                                    GgmlType::Q8_0, GgmlType::IQ4_XS, GgmlType::IQ3_XXS, GgmlType::IQ3_S};
  // The matrix too: a cpu-tier block's weights come from DRAM every step, and a cache-resident one
  // (16 MiB, before) measured every type at the read ceiling, so the planner took 2.1 GB of FFN blocks
  // predicted at 24 ms a step that took 35 (H100 host, 300 MiB L3: 22.6 tok/s against 30.1 predicted).
  q.gemv_q8 = measure_cpu_gemv_q8(types, {hw}, {1, 8}, buf, 1, quick, {}, 256 * 1024);
  for (auto& g : q.gemv_q8)
    if (read > 0) g.gbps = std::min(g.gbps, read);
  return q;
}

}  // namespace

const QuickCpuRates& quick_cpu_check() {
  static const QuickCpuRates rates = measure_quick_cpu_rates();
  return rates;
}

HardwareProfile detected_profile(bool use_gpu, bool cpu_rates) {
  const auto assumed = Provenance::datasheet("assumed (no --profile given; `strata probe -o mine.toml` measures it)");
  HardwareProfile p;
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  const uint64_t ram = pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) : 16 * kGiB;
  p.host_ram = {ram / 10 * 8, Provenance::datasheet("80% of physical RAM (sysconf)")};
  p.nvme_budget = {0, Provenance::datasheet("no disk tier without a profile")};
  p.nvme_path = "/var/tmp";
  const uint64_t threads = std::max(1u, std::thread::hardware_concurrency());
  // Typical desktop/server figures, on the low side so predictions do not flatter.
  p.host_read = {{1, 12, assumed}, {threads, std::min<double>(40, 12.0 * double(threads)), assumed}};
  for (GgmlType t : {GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q8_0, GgmlType::Q4_0,
                     GgmlType::F16, GgmlType::F32, GgmlType::IQ4_XS, GgmlType::IQ3_XXS, GgmlType::IQ3_S, GgmlType::IQ2_S})
    p.cpu_gemv.push_back({t, std::min<double>(15, 4.0 * double(threads)), assumed});

  const auto devs = use_gpu ? kernels::cuda::devices() : std::vector<kernels::cuda::DeviceInfo>{};
  if (devs.empty()) {
    p.name = "detected (cpu only)";
    p.description = "this machine, CPU only; rates assumed";
    p.vram_budget = {0, Provenance::datasheet("no GPU in use")};
    p.pinned_budget = {0, Provenance::datasheet("no GPU: nothing to pin for")};
    p.cuda_context = {0, Provenance::datasheet("no GPU in use")};
    p.device_read_gbps = {0, Provenance::datasheet("no GPU in use")};
    p.gpu_gemm_tflops = {0, Provenance::datasheet("no GPU in use")};
    return p;
  }
  const auto& d = devs[0];
  const auto seen = Provenance::datasheet(fmt::format("reported by the CUDA driver for {}", d.name));
  p.name = fmt::format("detected ({})", d.name);
  p.description = fmt::format("this machine: {} with {}; rates assumed", d.name, format_bytes(d.total_bytes));
  // The budget is what is free now (other processes' memory is not ours to plan with).
  p.vram_budget = {d.free_bytes, seen};
  p.cuda_context = {std::min<uint64_t>(512 * kMiB, d.free_bytes / 8), assumed};
  p.pinned_budget = {ram / 2, Provenance::datasheet("half of physical RAM")};
  // A kernel reads at most ~90% of the DRAM bandwidth (H200: 4390 of 4915 GB/s measured by
  // `strata probe`); 85% of what the driver reports is the low-side guess. 400 GB/s where it says nothing.
  if (d.datasheet_gbps > 0)
    p.device_read_gbps = {0.85 * d.datasheet_gbps,
                          Provenance::datasheet(fmt::format("85% of the {:.0f} GB/s of the memory clock x bus width the "
                                                            "driver reports (`strata probe` measures it)",
                                                            d.datasheet_gbps))};
  else
    p.device_read_gbps = {400, assumed};
  p.gpu_gemm_tflops = {50, assumed};
  // Streamed plans are PCIe-bound, so the link is measured rather than assumed (~30 ms: 64 MiB
  // copied in 1 MiB and in 64 MiB pieces): a PCIe 5 host runs at 2.5-3x the PCIe 4 guess, and a
  // prediction that far off would mislead the report and the planner's choices. The guess stays
  // where the copy fails.
  p.h2d_pinned = {{kMiB, 12, assumed}, {64 * kMiB, 20, assumed}};
  const auto quick =
      Provenance::measured_on("now", "this machine: a 64 MiB check at start-up (`strata probe` measures more)");
  std::vector<RatePoint> h2d;
  for (const uint64_t chunk : {kMiB, 64 * kMiB}) {
    auto r = kernels::cuda::measure_h2d_bandwidth(chunk, 64 * kMiB, 2);
    if (r && *r > 0) h2d.push_back({chunk, *r / 1e9, quick});
  }
  if (h2d.size() == 2) p.h2d_pinned = std::move(h2d);
  // The other side of that choice: what the CPU computes a block at (the int8 kernels the CUDA
  // engine's cpu-tier blocks run, RunShape::cpu_int8) and reads host RAM at.
  if (cpu_rates) {
    const QuickCpuRates& q = quick_cpu_check();
    if (!q.host_read.empty()) p.host_read = q.host_read;
    p.cpu_gemv_q8 = q.gemv_q8;
  }
  return p;
}

}  // namespace strata::offload
