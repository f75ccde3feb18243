#include "cli/model_args.h"

#include <algorithm>

#include "core/log.h"

namespace strata::cli {

void ModelArgs::add_to(CLI::App* sub) {
  sub->add_option("-m,--model", model, "GGUF model file")->required();
  sub->add_option("-c,--ctx-size", n_ctx, "Context length in tokens (default: enough for the job, at most 4096 "
                                          "unless asked, never more than the model allows)");
  sub->add_option("-t,--threads", threads, "CPU threads (default: all cores)");
  sub->add_option("-b,--ubatch", ubatch, "Tokens per prefill chunk")->capture_default_str()->check(CLI::Range(1, 65536));
  sub->add_option("--device", device, "Where to run: auto (the GPU when there is one), cpu, cuda")
      ->capture_default_str();
  sub->add_option("--cache-type-k,--cache-type", kv_type, "KV cache type (-ctk): f32 or f16")->capture_default_str();
}

std::unique_ptr<tbb::global_control> ModelArgs::thread_limit() const {
  if (threads <= 0) return nullptr;
  return std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism, size_t(threads));
}

Result<std::unique_ptr<runtime::Engine>> ModelArgs::open(uint32_t n_ctx_hint) const {
  runtime::ForwardOptions fo;
  if (kv_type == "f32") fo.kv_type = GgmlType::F32;
  else if (kv_type == "f16") fo.kv_type = GgmlType::F16;
  else return Status::error("unknown --cache-type '{}' (f32, f16)", kv_type);
  auto m = runtime::Model::load(model);
  if (!m) return m.status();
  const uint32_t train = (*m)->spec.hp.n_ctx_train;
  fo.n_ctx = n_ctx ? n_ctx : std::max<uint32_t>(std::min<uint32_t>(train ? train : 4096, 4096), n_ctx_hint);
  fo.ubatch = std::min(ubatch, fo.n_ctx);
  log::debug("{}", (*m)->spec.summary());
  runtime::Device dev = runtime::Device::automatic;
  if (device == "cpu") dev = runtime::Device::cpu;
  else if (device == "cuda") dev = runtime::Device::cuda;
  else if (device != "auto") return Status::error("unknown --device '{}' (auto, cpu, cuda)", device);
  return runtime::make_engine(m.value(), fo, dev);
}

}  // namespace strata::cli
