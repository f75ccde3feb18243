// strata logits: the hook for every correctness comparison. Writes the last (or every) position's
// logits as little-endian float32 [n][n_vocab] to a file.
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include "cli/command.h"
#include "cli/model_args.h"
#include "session/session.h"
#include "core/log.h"
#include "tokenizer/tokenizer.h"

namespace strata::cli {
namespace {

struct LogitsArgs {
  ModelArgs m;
  std::string tokens, tokens_file, prompt, out;
  bool all = false;
  bool no_bos = false;
};

Result<std::vector<int32_t>> parse_ids(const std::string& text, const std::string& what) {
  std::vector<int32_t> ids;
  std::string s = text;
  for (char& c : s)
    if (c == ',') c = ' ';
  std::istringstream in(s);
  std::string tok;
  while (in >> tok) {
    try {
      size_t used = 0;
      const long v = std::stol(tok, &used);
      if (used != tok.size() || v < 0 || v > INT32_MAX) throw std::invalid_argument(tok);
      ids.push_back(int32_t(v));
    } catch (...) {
      return Status::error("{}: '{}' is not a token id", what, tok);
    }
  }
  if (ids.empty()) return Status::error("{}: no token ids", what);
  return ids;
}

int run_logits(const LogitsArgs& a) {
  const auto limit = a.m.thread_limit();
  const int given = !a.tokens.empty() + !a.tokens_file.empty() + !a.prompt.empty();
  if (given != 1) {
    log::error("give exactly one of --tokens, --tokens-file, -p");
    return 2;
  }
  std::vector<int32_t> ids;
  if (!a.tokens.empty() || !a.tokens_file.empty()) {
    std::string text = a.tokens;
    if (!a.tokens_file.empty()) {
      std::ifstream in(a.tokens_file);
      if (!in) {
        log::error("{}: cannot open", a.tokens_file);
        return 1;
      }
      text.assign(std::istreambuf_iterator<char>(in), {});
    }
    auto parsed = parse_ids(text, a.tokens_file.empty() ? "--tokens" : a.tokens_file);
    if (!parsed) {
      log::error("{}", parsed.message());
      return 2;
    }
    ids = std::move(parsed.value());
  }
  OpenModel om;
  if (int rc = om.open(a.m, !a.prompt.empty())) return rc;
  if (int rc = om.open_engine()) return rc;
  runtime::Engine* fwd = &om.session->engine();
  if (!a.prompt.empty()) {
    ids = om.tok->encode(a.prompt, !a.no_bos, false);
    if (ids.empty()) {
      log::error("the prompt encodes to no tokens");
      return 2;
    }
  }
  std::vector<float> logits;
  if (Status s = fwd->eval(ids, a.all ? runtime::Logits::all : runtime::Logits::last, logits); !s) {
    log::error("{}", s.message());
    return 1;
  }
  // Written to a temporary name and renamed: a reader never sees half a file.
  const std::string tmp = a.out + ".partial";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f || std::fwrite(logits.data(), 4, logits.size(), f) != logits.size() || std::fclose(f) != 0 ||
      std::rename(tmp.c_str(), a.out.c_str()) != 0) {
    log::error("{}: cannot write the logits", a.out);
    return 1;
  }
  log::info("wrote {} x {} logits to {}", a.all ? ids.size() : 1, fwd->model().spec.hp.n_vocab, a.out);
  return 0;
}

}  // namespace

Command add_logits(CLI::App& app) {
  auto a = std::make_shared<LogitsArgs>();
  auto* sub = app.add_subcommand("logits", "Write the logits of a token sequence as float32 (for comparisons)");
  a->m.add_to(sub);
  sub->add_option("--tokens", a->tokens, "Token ids, comma- or space-separated");
  sub->add_option("--tokens-file", a->tokens_file, "File of token ids");
  sub->add_option("-p,--prompt", a->prompt, "Text, tokenized with the model's vocabulary");
  sub->add_flag("--no-bos", a->no_bos, "With -p: do not add BOS");
  sub->add_option("-o,--out", a->out, "Output file: little-endian float32 [n][n_vocab]")->required();
  sub->add_flag("--all", a->all, "Every position's logits, not just the last");
  return {sub, [a] { return run_logits(*a); }};
}

}  // namespace strata::cli
