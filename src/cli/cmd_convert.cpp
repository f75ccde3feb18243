// strata convert DIR OUT.gguf [--outtype f32|f16|bf16]: a Hugging Face checkpoint (config.json,
// model.safetensors or shards, tokenizer.model or tokenizer.json) -> GGUF; the inverse of export-hf.
#include <filesystem>
#include <memory>

#include "cli/command.h"
#include "core/log.h"
#include "core/units.h"
#include "model/gguf_writer.h"
#include "model/hf_import.h"
#include "tokenizer/spm_model.h"
#include "tokenizer/vocab_convert.h"

namespace strata::cli {
namespace {

namespace fs = std::filesystem;

struct ConvertArgs {
  std::string dir, out, outtype = "f16";
  int threads = 0;
  bool no_progress = false;
};

// The vocabulary: tokenizer.model (SentencePiece) first, else tokenizer.json. Returns the number
// of tokens (0: none found).
Result<size_t> add_vocab(const fs::path& dir, gguf::Writer& w) {
  if (fs::exists(dir / "tokenizer.model")) {
    auto m = tokenizer::parse_spm_model((dir / "tokenizer.model").string());
    if (!m) return m.status();
    STRATA_TRY(tokenizer::set_spm_vocab(*m, w).with_context((dir / "tokenizer.model").string()));
    if (m->model_type == 1)
      log::warn("tokenizer.model is a unigram model: strata's SPM encoder merges by score, which is exact for "
                "BPE models and close for unigram ones");
    if (m->normalizer != "identity")
      log::warn("tokenizer.model normalises text ('{}'); strata's SPM tokenizer does not (train with "
                "--normalization_rule_name=identity for identical ids)", m->normalizer);
    return m->pieces.size();
  }
  if (fs::exists(dir / "tokenizer.json")) {
    auto s = tokenizer::convert_tokenizer_json((dir / "tokenizer.json").string(), {}, w);
    if (!s) return s.status();
    return s->n_tokens;
  }
  return size_t(0);
}

int run_convert(const ConvertArgs& a) {
  GgmlType outtype;
  if (a.outtype == "f32") outtype = GgmlType::F32;
  else if (a.outtype == "f16") outtype = GgmlType::F16;
  else if (a.outtype == "bf16") outtype = GgmlType::BF16;
  else {
    log::error("unknown --outtype '{}' (have: f32, f16, bf16; then `strata quantize` for smaller types)", a.outtype);
    return 2;
  }
  auto m = model::open_hf_model(a.dir);
  if (!m) {
    log::error("convert: {}", m.message());
    return 1;
  }
  gguf::Writer w;
  model::set_hf_metadata(*m, outtype, w);
  auto n_tokens = add_vocab(a.dir, w);
  if (!n_tokens) {
    log::error("convert: {}", n_tokens.message());
    return 1;
  }
  if (*n_tokens == 0)
    log::warn("{}: no tokenizer.model or tokenizer.json: the GGUF has no vocabulary (logits work; tokenize and "
              "generate do not)", a.dir);
  else if (*n_tokens != m->hp.n_vocab)
    log::warn("the tokenizer has {} tokens, the embedding {} rows", *n_tokens, m->hp.n_vocab);
  if (m->n_unused) log::info("{} checkpoint tensors not needed by strata were left out", m->n_unused);
  model::HfImportOptions o;
  o.outtype = outtype;
  o.threads = a.threads;
  o.progress = !a.no_progress;
  auto bytes = model::write_hf_tensors(*m, o, w, a.out);
  if (!bytes) {
    log::error("convert: {}", bytes.message());
    return 1;
  }
  log::info("wrote {} ({}, {}): {} tensors, {} layers", a.out, a.outtype, format_bytes(*bytes), m->tensors.size(),
            m->hp.n_layer);
  return 0;
}

}  // namespace

Command add_convert(CLI::App& app) {
  auto a = std::make_shared<ConvertArgs>();
  auto* sub = app.add_subcommand("convert", "Convert a Hugging Face checkpoint (safetensors + config.json + "
                                            "tokenizer) to GGUF (gemma3, llama, qwen3)");
  sub->add_option("dir", a->dir, "Model folder: config.json, model.safetensors (or an index and shards), "
                                 "tokenizer.model or tokenizer.json")->required();
  sub->add_option("output", a->out, "Output GGUF (written to OUTPUT.partial, then renamed)")->required();
  sub->add_option("--outtype", a->outtype, "Matrix type: f32, f16, bf16 (norms stay f32)")->capture_default_str();
  sub->add_option("-t,--threads", a->threads, "Worker threads (default: all cores)");
  sub->add_flag("--no-progress", a->no_progress, "Do not show progress");
  return {sub, [a] { return run_convert(*a); }};
}

}  // namespace strata::cli
