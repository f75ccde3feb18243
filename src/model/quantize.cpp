#include "model/quantize.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>


#include "core/log.h"
#include "core/progress.h"
#include "kernels/cpu/quant/iq_quant.h"
#include "kernels/cpu/quant_kernels.h"
#include "model/gguf_file.h"
#include "model/gguf_parallel_write.h"
#include "model/gguf_writer.h"
#include "model/model_spec.h"
#include "model/quant_mix.h"

namespace strata::model {
namespace {

struct Planned {
  const gguf::TensorInfo* src;
  GgmlType type;  // output type
  size_t index;   // in the writer
  bool copy;      // bytes copied unchanged
  std::vector<float> importance;  // from the imatrix (empty: none / uniform)
};

struct Chunk {
  size_t tensor;
  uint64_t row0, rows;
};

constexpr const char* kTypeList =
    "f32 f16 bf16 q4_0 q4_1 q5_0 q5_1 q8_0 q2_k q3_k q4_k q5_k q6_k iq4_nl iq4_xs iq3_xxs iq3_s iq2_xxs iq2_xs "
    "iq2_s iq1_s iq1_m";

std::string lower_case(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

std::string mix_list() { return fmt::format("{}", fmt::join(quant_mix_names(), " ")); }

}  // namespace

Result<QuantizeTarget> parse_quantize_mix(const std::string& name) {
  const std::string lower = lower_case(name);
  if (!is_quant_mix(lower)) return Status::error("unknown mix '{}' (have: {})", name, mix_list());
  QuantizeTarget t;
  t.name = name;
  t.mix = lower;
  t.type = GgmlType::Q4_K;  // unused with a mix
  return t;
}

Result<QuantizeTarget> parse_quantize_target(const std::string& name) {
  QuantizeTarget t;
  t.name = name;
  const std::string lower = lower_case(name);
  const auto type = ggml_type_from_name(lower);
  if (type && ggml_type_info(*type).has_cpu_kernels && kernels::cpu::quant_kernels(*type) &&
      kernels::cpu::quant_kernels(*type)->quantize) {
    t.type = *type;
    return t;
  }
  if (is_quant_mix(lower)) return parse_quantize_mix(lower);
  return Status::error("unknown quantisation type '{}' (have: {} and the mixes {})", name, kTypeList, mix_list());
}

Result<QuantizeSummary> quantize_model(const std::string& in_path, const std::string& out_path,
                                       const QuantizeOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  auto file = gguf::File::open(in_path);
  if (!file) return file.status();
  auto spec = spec_from_gguf(*file);
  if (!spec) return spec.status();
  const QuantizeTarget& target = opt.target;

  gguf::Writer w;
  for (const auto& [key, value] : file->metadata()) {
    if (key == "general.alignment") continue;  // set_alignment writes it
    w.set(key, value);
  }
  w.set("general.file_type", gguf::Value::u32(file_type_id(target.mix, target.type)));
  w.set("general.quantization_version", gguf::Value::u32(2));
  w.set_alignment(file->alignment());

  std::vector<Planned> planned;
  QuantizeSummary sum;
  uint32_t n_from_quant = 0;
  for (const auto& t : file->tensors()) {
    const auto named = role_from_tensor_name(t.name);
    GgmlType type = t.type;
    if (named && t.ne.size() >= 2) type = mix_tensor_type(target.mix, target.type, named->role, named->layer, spec->hp, t.ne[0]);
    else if (named) type = GgmlType::F32;  // 1-D tensors of the table are norms: kept in f32
    const bool copy = type == t.type;
    const auto& info = ggml_type_info(type);
    if (!copy) {
      if (t.ne[0] % info.block_size != 0)
        return Status::error("{}: tensor '{}' has rows of {} elements, not a multiple of {}'s block size {}", in_path,
                             t.name, t.ne[0], info.name, info.block_size);
      const auto* src_k = kernels::cpu::quant_kernels(t.type);
      if (!src_k || !src_k->dequantize)
        return Status::error("{}: tensor '{}' has type {}, which strata cannot decode", in_path, t.name,
                             ggml_type_info(t.type).name);
    }
    if (!copy && t.type != GgmlType::F32 && t.type != GgmlType::F16 && t.type != GgmlType::BF16) ++n_from_quant;
    std::vector<float> importance;
    if (!copy && opt.imatrix && kernels::cpu::quantize_weighted(type)) {
      const auto it = opt.imatrix->entries.find(t.name);
      if (it != opt.imatrix->entries.end() && it->second.n_in != t.ne[0])
        return Status::error("{}: tensor '{}' has rows of {} elements, its imatrix entry {}", in_path, t.name, t.ne[0],
                             it->second.n_in);
      importance = opt.imatrix->importance(t.name);
      if (!importance.empty()) ++sum.n_with_imatrix;
    }
    if (!copy && !opt.imatrix && kernels::cpu::wants_importance(type) && !opt.allow_no_imatrix)
      return Status::error("{} needs --imatrix (tensor '{}'; llama.cpp refuses it too: without an importance matrix "
                           "its quality is poor; --allow-no-imatrix quantises with uniform importance)",
                           ggml_type_info(type).name, t.name);
    planned.push_back({&t, type, w.add_tensor(t.name, type, t.ne), copy, std::move(importance)});
    ++sum.n_tensors;
    (copy ? sum.n_copied : sum.n_requantized) += 1;
  }

  if (n_from_quant)
    log::warn("{}: {} tensors are already quantised; requantising them compounds two rounding errors (quantise "
              "from an f32/f16/bf16 model where you can)", in_path, n_from_quant);

  // Chunks of ~4 MiB of f32 rows: bounded memory per worker, parallelism within big tensors.
  constexpr uint64_t kChunkFloats = 1ull << 20;
  std::vector<Chunk> chunks;
  for (size_t i = 0; i < planned.size(); ++i) {
    const auto& t = *planned[i].src;
    const uint64_t rows = t.rows();
    const uint64_t per = std::max<uint64_t>(1, kChunkFloats / std::max<uint64_t>(1, t.ne[0]));
    for (uint64_t r = 0; r < rows; r += per) chunks.push_back({i, r, std::min(per, rows - r)});
  }

  Progress progress(fmt::format("quantize {} -> {}", in_path, target.name), file->file_size(), "B", opt.progress);
  STRATA_TRY(write_gguf_in_pieces(w, out_path, chunks.size(), opt.threads, progress, [&](size_t ci) -> Result<uint64_t> {
    const Chunk& c = chunks[ci];
    const Planned& p = planned[c.tensor];
    const gguf::TensorInfo& t = *p.src;
    const uint64_t n = t.ne[0];
    const uint64_t in_row = ggml_row_bytes(t.type, n), out_row = ggml_row_bytes(p.type, n);
    const uint8_t* src = t.data + c.row0 * in_row;
    if (p.copy) {
      STRATA_TRY(w.write_tensor_range(p.index, c.row0 * out_row, src, c.rows * out_row));
    } else {
      const auto* dec = kernels::cpu::quant_kernels(t.type);
      const auto* enc = kernels::cpu::quant_kernels(p.type);
      const auto weighted = kernels::cpu::quantize_weighted(p.type);
      const float* imp = p.importance.empty() ? nullptr : p.importance.data();
      std::vector<float> f(c.rows * n);
      std::vector<uint8_t> out(c.rows * out_row);
      for (uint64_t r = 0; r < c.rows; ++r) {
        dec->dequantize(src + r * in_row, f.data() + r * n, int64_t(n));
        if (weighted) weighted(f.data() + r * n, out.data() + r * out_row, int64_t(n), imp);
        else enc->quantize(f.data() + r * n, out.data() + r * out_row, int64_t(n));
      }
      STRATA_TRY(w.write_tensor_range(p.index, c.row0 * out_row, out.data(), out.size()));
    }
    return uint64_t(c.rows * in_row);
  }));
  sum.in_bytes = file->file_size();
  sum.out_bytes = w.total_bytes();
  sum.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return sum;
}

}  // namespace strata::model
