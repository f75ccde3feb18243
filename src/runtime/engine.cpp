#include "runtime/engine.h"

#include "kernels/cuda/device_info.h"
#include "runtime/cpu_forward.h"
#include "runtime/cuda_forward.h"

namespace strata::runtime {

bool Residency::any_streamed() const {
  for (bool b : attention_streamed) if (b) return true;
  for (bool b : ffn_streamed) if (b) return true;
  return head_streamed;
}

Result<std::unique_ptr<Engine>> make_engine(std::shared_ptr<const Model> model, ForwardOptions options, Device device) {
  if (device == Device::automatic)
    device = kernels::cuda::devices().empty() ? Device::cpu : Device::cuda;
  if (device == Device::cuda) {
    std::string why;
    if (kernels::cuda::devices(&why).empty()) return Status::error("--device cuda: no usable GPU ({})", why);
    auto f = CudaForward::create(std::move(model), options);
    if (!f) return f.status();
    return std::unique_ptr<Engine>(std::move(f.value()));
  }
  if (options.residency.any_streamed() || options.residency.vram_budget)
    return Status::error("a VRAM budget and weight streaming need the CUDA engine (--device cuda)");
  auto f = CpuForward::create(std::move(model), options);
  if (!f) return f.status();
  return std::unique_ptr<Engine>(std::move(f.value()));
}

}  // namespace strata::runtime
