#include "runtime/shadow_weights.h"

#include <vector>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include "kernels/cpu/quant/iq_quant.h"
#include "kernels/cpu/quant_kernels.h"

namespace strata::runtime {
namespace {

namespace cpu = kernels::cpu;

// The reference quantiser of `type` from f32 rows: the importance-aware one where the type has
// it (without an importance matrix: uniform weights), else QuantKernels::quantize.
struct Quantiser {
  cpu::QuantizeWeightedFn weighted = nullptr;
  cpu::QuantizeFn plain = nullptr;
  explicit operator bool() const { return weighted || plain; }
  void operator()(const float* src, void* dst, int64_t n) const {
    if (weighted) weighted(src, dst, n, nullptr);
    else plain(src, dst, n);
  }
};

Quantiser quantiser(GgmlType type) {
  const cpu::QuantKernels* k = cpu::quant_kernels(type);
  return {cpu::quantize_weighted(type), k ? k->quantize : nullptr};
}

}  // namespace

Result<ShadowWeights> make_shadow_weights(const model::ModelWeights& w, const model::ModelSpec& spec, GgmlType type) {
  const GgmlTypeInfo& to = ggml_type_info(type);
  const Quantiser quantise = quantiser(type);
  if (!quantise || !to.has_cpu_kernels) return Status::error("shadow weights: strata cannot quantise to {}", to.name);
  ShadowWeights out;
  out.type = type;
  out.weights = w;
  for (uint32_t il = 0; il < spec.hp.n_layer; ++il) {
    for (const model::LayerTensor& t : model::layer_tensors()) {
      if (!t.matrix) continue;
      kernels::WeightView& m = out.weights.layers[il].*t.matrix;
      if (m.empty() || m.type == type) continue;
      if (m.n_in % to.block_size != 0) {
        ++out.kept;
        continue;
      }
      const cpu::QuantKernels* from = cpu::quant_kernels(m.type);
      if (!from || !from->dequantize || m.layout != kernels::WeightLayout::kGguf)
        return Status::error("shadow weights: layer {} has a {} matrix strata cannot decode on the CPU", il,
                             ggml_type_info(m.type).name);
      const uint64_t row_bytes = uint64_t(m.n_in / to.block_size) * to.type_size;
      std::vector<uint8_t>& buf = out.storage.emplace_back(row_bytes * uint64_t(m.n_out));
      const kernels::WeightView src = m;
      tbb::parallel_for(tbb::blocked_range<int64_t>(0, m.n_out, 16), [&](const tbb::blocked_range<int64_t>& rg) {
        std::vector<float> row(size_t(src.n_in));
        for (int64_t r = rg.begin(); r < rg.end(); ++r) {
          from->dequantize(src.row(r), row.data(), src.n_in);
          quantise(row.data(), buf.data() + uint64_t(r) * row_bytes, src.n_in);
        }
      });
      m = kernels::WeightView{buf.data(), type, m.n_in, m.n_out, row_bytes, kernels::WeightLayout::kGguf};
      out.bytes += buf.size();
    }
  }
  if (out.storage.empty())
    return Status::error("shadow weights: no layer matrix has rows of whole {} blocks ({} elements)", to.name,
                         to.block_size);
  return out;
}

}  // namespace strata::runtime
