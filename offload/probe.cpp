#include "offload/probe.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <tbb/global_control.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include "core/rng.h"
#include "core/units.h"
#include "kernels/cpu/dot_q8.h"
#include "kernels/cpu/gemv_q8.h"
#include "kernels/cpu/memory_bandwidth.h"
#include "kernels/cpu/quant_kernels.h"
#include "kernels/cuda/device_info.h"
#include "kernels/cuda/read_probe.h"
#include "offload/disk_probe.h"

namespace strata::offload {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::string today() {
  std::time_t t = std::time(nullptr);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", std::localtime(&t));
  return buf;
}

std::string hostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown host";
  return buf;
}

uint64_t host_ram_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) : 0;
}

// GB/s of weights for a GEMV with the best dot kernel, all threads, best of reps.
double gemv_gbps(GgmlType type, uint64_t bytes, int reps) {
  const auto* k = kernels::cpu::quant_kernels(type);
  if (!k || !k->fill_random) return 0;
  const auto info = ggml_type_info(type);
  const int64_t n = 4096 - 4096 % info.block_size;
  const uint64_t row_bytes = ggml_row_bytes(type, uint64_t(n));
  const int64_t rows = int64_t(std::max<uint64_t>(1, bytes / row_bytes));
  std::unique_ptr<uint8_t[]> w(new uint8_t[row_bytes * rows]);
  Rng rng(1);
  k->fill_random(w.get(), n * rows, rng, 0.02f);
  std::vector<float> x(static_cast<size_t>(n), 0.5f);
  std::vector<float> y(static_cast<size_t>(rows));
  auto dot = kernels::cpu::best_dot(type);
  float* yp = y.data();
  const float* xp = x.data();
  const uint8_t* wp = w.get();
  double best = 0;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, rows, 64), [&](const tbb::blocked_range<int64_t>& rg) {
      for (int64_t i = rg.begin(); i < rg.end(); ++i) yp[i] = dot(wp + row_bytes * i, xp, n);
    });
    best = std::max(best, double(row_bytes * rows) / since(t0) / 1e9);
  }
  return best;
}

}  // namespace

std::vector<GemvQ8Rate> measure_cpu_gemv_q8(const std::vector<GgmlType>& types, const std::vector<int>& threads,
                                            const std::vector<int>& cols, uint64_t bytes, int reps,
                                            const Provenance& prov,
                                            const std::function<void(const std::string&)>& progress,
                                            uint64_t random_bytes) {
  std::vector<GemvQ8Rate> out;
  const int max_cols = cols.empty() ? 1 : *std::max_element(cols.begin(), cols.end());
  const int64_t n = 4096;
  // One buffer for every type, touched once: beyond the last-level cache it is hundreds of MiB, and
  // a fresh allocation per type would pay its page faults eight times over (seconds at start-up).
  auto rows_of = [&](uint64_t row_bytes) { return int64_t(std::max<uint64_t>(kernels::cpu::kQ8MaxRows, bytes / row_bytes)); };
  uint64_t largest = 1;
  for (GgmlType type : types) {
    const uint64_t row_bytes = ggml_row_bytes(type, uint64_t(n));
    largest = std::max(largest, row_bytes * uint64_t(rows_of(row_bytes)));
  }
  std::unique_ptr<uint8_t[]> w(new uint8_t[largest]);
  for (GgmlType type : types) {
    const auto* k = kernels::cpu::quant_kernels(type);
    if (!kernels::cpu::has_dot_q8(type) || !k || !k->fill_random) continue;
    const uint64_t row_bytes = ggml_row_bytes(type, uint64_t(n));
    const int64_t rows = rows_of(row_bytes);
    Rng rng(1);
    // Random rows for up to random_bytes, copied over the rest (filling 1 GiB takes seconds per type).
    const int64_t filled = std::min<int64_t>(rows, std::max<int64_t>(1, int64_t(random_bytes / row_bytes)));
    k->fill_random(w.get(), n * filled, rng, 0.02f);
    tbb::parallel_for(tbb::blocked_range<int64_t>(1, (rows + filled - 1) / filled), [&](const auto& rg) {
      for (int64_t i = rg.begin(); i < rg.end(); ++i) {
        const int64_t r = i * filled;
        std::memcpy(w.get() + uint64_t(r) * row_bytes, w.get(), uint64_t(std::min(filled, rows - r)) * row_bytes);
      }
    });
    const kernels::WeightView view{w.get(), type, n, rows, row_bytes};
    std::vector<float> x(size_t(max_cols) * size_t(n)), y(size_t(max_cols) * size_t(rows));
    for (auto& v : x) v = rng.normal();
    for (int t : threads) {
      tbb::task_arena arena(std::max(1, t));
      for (int c : cols) {
        double best = 0;
        arena.execute([&] {
          for (int r = 0; r <= reps; ++r) {  // pass 0 warms up (page faults, the arena's threads)
            const auto t0 = Clock::now();
            kernels::cpu::matmul_q8(view, x.data(), c, y.data());
            const double g = double(row_bytes * uint64_t(rows)) / since(t0) / 1e9;
            if (r > 0 || reps == 0) best = std::max(best, g);
          }
        });
        out.push_back({type, uint32_t(std::max(1, t)), uint32_t(c), best, prov});
        if (progress)
          progress(fmt::format("CPU int8 GEMV {:<7} {:>3} threads, {:>2} columns: {:.1f} GB/s of weights",
                               ggml_type_info(type).name, t, c, best));
      }
    }
  }
  return out;
}

Result<HardwareProfile> probe(const ProbeOptions& opt) {
  auto say = [&](const std::string& s) { if (opt.progress) opt.progress(s); };
  const auto measured = Provenance::measured_on(today(), hostname());
  HardwareProfile p;
  p.name = "probe-" + hostname();
  p.description = fmt::format("measured by strata probe{} on {}", opt.quick ? " --quick" : "", hostname());
  const uint64_t ram = host_ram_bytes();
  p.host_ram = {ram / 10 * 8, Provenance::datasheet("80% of physical RAM (sysconf), leaving room for the OS")};
  p.pinned_budget = {ram / 2, Provenance::datasheet("half of physical RAM (a safe default for page-locked memory)")};

  // Host memory read by threads.
  const int hw = int(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<int> thread_counts{1};
  for (int t = 2; t < hw; t *= 2) thread_counts.push_back(t);
  if (hw > 1) thread_counts.push_back(hw);
  const uint64_t buf = opt.quick ? 256 * kMiB : 1 * kGiB;
  for (int t : thread_counts) {
    tbb::task_arena arena(t);
    double g = 0;
    arena.execute([&] { g = kernels::cpu::measure_read_bandwidth(buf, opt.quick ? 2 : 4); });
    p.host_read.push_back({uint64_t(t), g, measured});
    say(fmt::format("host read, {:>3} threads: {:.1f} GB/s", t, g));
  }

  // CPU GEMV per quant type (all threads); the i-quants the mixes use (model/quant_mix.cpp), whose
  // grid lookups cost the CPU differently from the K types' unpacking.
  const GgmlType types[] = {GgmlType::Q3_K,   GgmlType::Q4_K,    GgmlType::Q5_K,  GgmlType::Q6_K,
                            GgmlType::Q8_0,   GgmlType::Q4_0,    GgmlType::F16,   GgmlType::IQ4_XS,
                            GgmlType::IQ3_XXS, GgmlType::IQ3_S,  GgmlType::IQ2_S};
  for (GgmlType t : types) {
    const double g = gemv_gbps(t, opt.quick ? 64 * kMiB : 256 * kMiB, opt.quick ? 2 : 4);
    if (g <= 0) continue;
    p.cpu_gemv.push_back({t, g, measured});
    say(fmt::format("CPU GEMV {:<5}: {:.1f} GB/s of weights", ggml_type_info(t).name, g));
  }

  // The int8-activation GEMV (the cpu engine's --cpu-matmul int8 path) by thread count, at 1 and 8
  // columns (a decode step, a speculative verify). The 2- and 1-bit grid types too: their f32 rate,
  // the planner's fallback, is no guide to the int8 one (one Zen 5 core, GB/s of weights at one
  // column, f32 -> int8: iq2_s 4.3 -> 5.1, iq1_s 1.0 -> 3.6; eight int8 columns cost about 1.4
  // of one).
  const std::vector<GgmlType> q8_types{GgmlType::Q3_K,    GgmlType::Q4_K,    GgmlType::Q5_K,  GgmlType::Q6_K,
                                       GgmlType::Q8_0,    GgmlType::IQ4_XS,  GgmlType::IQ3_XXS, GgmlType::IQ3_S,
                                       GgmlType::IQ2_XXS, GgmlType::IQ2_XS,  GgmlType::IQ2_S, GgmlType::IQ1_S,
                                       GgmlType::IQ1_M};
  // The matrix must dwarf the last-level cache: the H200 host's L3 is 300 MiB, and a 64 MiB one
  // (an earlier --quick) measured q8_0 at twice the host's DRAM read rate.
  p.cpu_gemv_q8 = measure_cpu_gemv_q8(q8_types, thread_counts, {1, 8}, opt.quick ? 512 * kMiB : 1 * kGiB,
                                      opt.quick ? 1 : 3, measured, say);

  // Disk by queue depth (offload/disk_probe.h says how the host's cache is kept out of it).
  p.nvme_path = opt.dir;
  DiskProbeOptions dopt;
  dopt.dir = opt.dir;
  dopt.backend = opt.io_backend;
  dopt.file_bytes = opt.quick ? 512 * kMiB : 4 * kGiB;
  if (opt.quick) dopt.queue_depths = {1, 4, 32};
  dopt.progress = say;
  auto disk = probe_disk(dopt);
  if (!disk) return disk.status();
  if (!disk->notice.empty()) say(disk->notice);
  p.description += fmt::format("; disk read through {}", disk->backend);
  for (const auto& d : disk->points) {
    p.nvme_read.push_back({d.queue_depth, d.gbps, measured});
    say(fmt::format("disk read ({}), QD {:>2}, {} blocks: {:.2f} GB/s", disk->backend, d.queue_depth,
                    format_bytes(d.block_bytes), d.gbps));
  }
  p.nvme_budget = {64 * kGiB, Provenance::datasheet("default budget; set to the space strata may use")};

  // GPU.
  std::string why;
  const auto devs = kernels::cuda::devices(&why);
  if (devs.empty()) {
    say(fmt::format("GPU: none ({})", why));
    p.vram_budget = {0, Provenance::datasheet("no CUDA device: " + why)};
    p.cuda_context = {0, Provenance::datasheet("no CUDA device")};
    p.device_read_gbps = {0, Provenance::datasheet("no CUDA device")};
    p.gpu_gemm_tflops = {0, Provenance::datasheet("no CUDA device")};
  } else {
    const auto& d = devs[0];
    say(fmt::format("GPU: {} ({} total, {} free)", d.name, format_bytes(d.total_bytes), format_bytes(d.free_bytes)));
    p.vram_budget = {d.total_bytes, measured};
    p.cuda_context = {d.total_bytes > d.free_bytes ? d.total_bytes - d.free_bytes : 512 * kMiB, measured};
    auto read = kernels::cuda::measure_read_bandwidth(size_t(4) * kGiB, 5);
    if (!read) return read.status();
    p.device_read_gbps = {*read / 1e9, measured};
    say(fmt::format("GPU device-memory read: {:.0f} GB/s", *read / 1e9));
    for (uint64_t chunk : {1 * kMiB, 8 * kMiB, 64 * kMiB}) {
      auto h2d = kernels::cuda::measure_h2d_bandwidth(chunk, 1 * kGiB, 3);
      if (!h2d) return h2d.status();
      p.h2d_pinned.push_back({chunk, *h2d / 1e9, measured});
      say(fmt::format("PCIe H2D pinned, {} copies: {:.1f} GB/s", format_bytes(chunk), *h2d / 1e9));
    }
    auto gemm = kernels::cuda::measure_gemm_flops(8192, 5);
    if (!gemm) return gemm.status();
    p.gpu_gemm_tflops = {*gemm / 1e12, measured};
    say(fmt::format("GPU bf16 GEMM 8192^3: {:.0f} TFLOP/s", *gemm / 1e12));
  }
  if (auto s = validate_profile(p); !s) return s;
  return p;
}

}  // namespace strata::offload
