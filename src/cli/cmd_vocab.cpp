// strata vocab tokenizer.json -o out.gguf [--as spm|bpe] [--config tokenizer_config.json]:
// converts a Hugging Face tokenizer into a vocabulary-only GGUF (metadata, no tensors).
#include <map>
#include <memory>

#include "cli/command.h"
#include "core/log.h"
#include "model/gguf_writer.h"
#include "tokenizer/vocab_convert.h"

namespace strata::cli {
namespace {

struct VocabArgs {
  std::string input;
  std::string output;
  std::string as;
  std::string config;
  std::string name;
};

int run_vocab(const VocabArgs& args) {
  tokenizer::ConvertOptions opt;
  if (args.as == "spm") opt.as = tokenizer::VocabType::spm;
  else if (args.as == "bpe") opt.as = tokenizer::VocabType::bpe;
  opt.config_path = args.config;
  opt.name = args.name;
  gguf::Writer w;
  auto summary = tokenizer::convert_tokenizer_json(args.input, opt, w);
  if (!summary) {
    log::error("{}", summary.message());
    return 1;
  }
  if (Status s = w.write_header_only(args.output); !s) {
    log::error("{}", s.message());
    return 1;
  }
  log::info("{}: {} vocabulary, {} tokens, {} merges{}{}", args.output,
            summary->type == tokenizer::VocabType::spm ? "spm (llama)" : "bpe (gpt2)",
            summary->n_tokens, summary->n_merges, summary->pre.empty() ? "" : ", pre-tokenizer ",
            summary->pre);
  return 0;
}

}  // namespace

Command add_vocab(CLI::App& app) {
  auto args = std::make_shared<VocabArgs>();
  auto* sub = app.add_subcommand("vocab", "Convert a tokenizer.json into a vocabulary-only GGUF");
  sub->add_option("tokenizer", args->input, "tokenizer.json (Hugging Face tokenizers format)")->required();
  sub->add_option("-o,--output", args->output, "Output GGUF")->required();
  sub->add_option("--as", args->as, "Vocabulary kind: spm (llama) or bpe (gpt2); default from the model")
      ->check(CLI::IsMember({"spm", "bpe"}));
  sub->add_option("--config", args->config, "tokenizer_config.json (default: beside tokenizer.json)");
  sub->add_option("--name", args->name, "general.name (default: the tokenizer's folder name)");
  return {sub, [args] { return run_vocab(*args); }};
}

}  // namespace strata::cli
