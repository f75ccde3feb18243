#include "session/run_options.h"

#include <charconv>

#include "kernels/cuda/device_info.h"
#include "kv/kv_quant.h"
#include "offload/executor_plan.h"

namespace strata::session {

offload::KvDtype planner_kv_dtype(GgmlType t) {
  switch (t) {
    case GgmlType::F16: return offload::KvDtype::f16;
    case GgmlType::Q8_0: return offload::KvDtype::q8;
    case GgmlType::Q4_1: return offload::KvDtype::q4;
    default: return offload::KvDtype::f32;
  }
}

std::unique_ptr<tbb::global_control> RunOptions::thread_limit() const {
  if (threads <= 0) return nullptr;
  return std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism, size_t(threads));
}

Result<std::optional<uint32_t>> RunOptions::kv_host_layers() const {
  if (kv_host == "auto") return std::optional<uint32_t>();
  if (kv_host == "none") return std::optional<uint32_t>(0);
  if (kv_host == "all") return std::optional<uint32_t>(offload::kAllKvLayers);
  uint32_t n = 0;
  const auto [end, ec] = std::from_chars(kv_host.data(), kv_host.data() + kv_host.size(), n);
  if (ec != std::errc() || end != kv_host.data() + kv_host.size() || kv_host.empty())
    return Status::error("--kv-host: '{}' is not none, auto, all or a layer count", kv_host);
  return std::optional<uint32_t>(n);
}

Result<bool> resolve_cpu_int8(const std::string& cpu_matmul) {
  if (cpu_matmul == "int8" || cpu_matmul == "auto") return true;
  if (cpu_matmul == "exact") return false;
  return Status::error("--cpu-matmul: '{}' is not auto, exact or int8", cpu_matmul);
}

Result<bool> RunOptions::cpu_int8() const { return resolve_cpu_int8(cpu_matmul); }

Result<offload::CpuBlocks> RunOptions::cpu_blocks_mode() const { return offload::cpu_blocks_from_name(cpu_blocks); }

bool RunOptions::uses_gpu() const {
  return !vram.empty() || device == "cuda" || (device == "auto" && !kernels::cuda::devices().empty());
}

Result<std::pair<GgmlType, GgmlType>> RunOptions::kv_types() const {
  // f16 on the GPU (as llama.cpp): half the VRAM of f32, and prefill attention runs on tensor
  // cores (f32 KV takes the scalar kernel: 3x slower on a 4K prompt of the 27B). The planner's
  // VRAM accounting under a budget assumes it too. f32 on the CPU engine, the exact reference.
  const GgmlType def = uses_gpu() ? GgmlType::F16 : GgmlType::F32;
  auto parse = [&](const std::string& name, const char* flag, GgmlType fallback) -> Result<GgmlType> {
    if (name.empty()) return fallback;
    if (auto t = kv::kv_type_from_name(name)) return *t;
    return Status::error("{}: unknown KV cache type '{}' (f32, f16, q8, q4)", flag, name);
  };
  auto both = parse(cache_type, "--cache-type", def);
  if (!both) return both.status();
  auto k = parse(cache_type_k, "--cache-type-k", *both);
  if (!k) return k.status();
  auto v = parse(cache_type_v, "--cache-type-v", *both);
  if (!v) return v.status();
  return std::pair{*k, *v};
}

}  // namespace strata::session
