// strata export-hf -m MODEL.gguf -o DIR: the model's dequantised weights as a Hugging Face
// checkpoint (config.json + float32 model.safetensors), for reference runs with HF transformers
// (tools/reference/compare_hf.py).
#include <chrono>
#include <filesystem>
#include <memory>

#include "cli/command.h"
#include "core/log.h"
#include "core/units.h"
#include "model/gguf_file.h"
#include "model/hf_export.h"
#include "model/model_spec.h"

namespace strata::cli {
namespace {

struct ExportHfArgs {
  std::string model;
  std::string out;
};

int run_export_hf(const ExportHfArgs& a) {
  const auto t0 = std::chrono::steady_clock::now();
  auto file = gguf::File::open(a.model);
  if (!file) {
    log::error("{}", file.message());
    return 1;
  }
  auto spec = model::spec_from_gguf(*file);
  if (!spec) {
    log::error("{}", spec.message());
    return 1;
  }
  if (Status s = model::export_hf(*file, *spec, a.out); !s) {
    log::error("export-hf: {}", s.message());
    return 1;
  }
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(std::filesystem::path(a.out) / "model.safetensors", ec);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  log::info("{} -> {}/ (config.json, model.safetensors {} float32) in {:.1f} s: {}", a.model, a.out,
            ec ? std::string("?") : format_bytes(bytes), secs, spec->summary());
  return 0;
}

}  // namespace

Command add_export_hf(CLI::App& app) {
  auto a = std::make_shared<ExportHfArgs>();
  auto* sub = app.add_subcommand("export-hf", "Write a GGUF model's dequantised weights as a Hugging Face "
                                              "checkpoint (config.json + float32 safetensors)");
  sub->add_option("-m,--model", a->model, "GGUF file (gemma3, llama, qwen3)")->required();
  sub->add_option("-o,--out", a->out, "Output folder (created; config.json and model.safetensors replaced)")
      ->required();
  return {sub, [a] { return run_export_hf(*a); }};
}

}  // namespace strata::cli
