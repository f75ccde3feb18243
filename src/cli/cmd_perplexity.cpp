// strata perplexity: llama.cpp's method. The text is tokenized once and cut into non-overlapping
// chunks of n_ctx tokens; each chunk starts with BOS and is evaluated from scratch; the second
// half of each chunk is scored (the first half only gives context). --save-logits / --kl-base
// compare two runs (another model, quantisation or KV type) by KL divergence and top-1 agreement.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>

#include "cli/command.h"
#include "cli/model_args.h"
#include "session/session.h"
#include "core/log.h"
#include "runtime/sampler.h"
#include "tokenizer/tokenizer.h"

namespace strata::cli {
namespace {

struct PerplexityArgs {
  ModelArgs m;
  std::string file, save_logits, kl_base;
  int32_t max_chunks = -1;
};

int run_perplexity(const PerplexityArgs& a) {
  const auto limit = a.m.thread_limit();
  std::ifstream in(a.file, std::ios::binary);
  if (!in) {
    log::error("{}: cannot open", a.file);
    return 1;
  }
  const std::string text{std::istreambuf_iterator<char>(in), {}};
  if (a.m.n_ctx == 0) {
    log::error("give the chunk length with -c (e.g. -c 512)");
    return 2;
  }
  OpenModel om;
  if (int rc = om.open(a.m, true)) return rc;
  if (int rc = om.open_engine()) return rc;
  runtime::Engine* fwd = &om.session->engine();
  auto& f = *fwd;
  const std::vector<int32_t> ids = om.tok->encode(text, false, false);
  const uint32_t n_ctx = f.n_ctx();
  if (n_ctx < 4) {
    log::error("-c {} is too short to score anything", n_ctx);
    return 2;
  }
  size_t n_chunks = ids.size() / n_ctx;
  if (a.max_chunks > 0) n_chunks = std::min(n_chunks, size_t(a.max_chunks));
  if (n_chunks == 0) {
    log::error("{}: {} tokens, fewer than one chunk of {} (use a longer text or a smaller -c)", a.file, ids.size(), n_ctx);
    return 2;
  }
  const size_t n_vocab = f.model().spec.hp.n_vocab;
  const uint32_t first = n_ctx / 2;  // scored positions predict tokens first+1 .. n_ctx-1
  const size_t scored_per_chunk = n_ctx - 1 - first;

  FILE* save = nullptr;
  if (!a.save_logits.empty() && !(save = std::fopen(a.save_logits.c_str(), "wb"))) {
    log::error("{}: cannot create", a.save_logits);
    return 1;
  }
  FILE* base = nullptr;
  if (!a.kl_base.empty()) {
    if (!(base = std::fopen(a.kl_base.c_str(), "rb"))) {
      log::error("{}: cannot open", a.kl_base);
      return 1;
    }
  }
  log::info("{} tokens, {} chunks of {}, scoring {} tokens per chunk", ids.size(), n_chunks, n_ctx, scored_per_chunk);
  double nll = 0, kl_sum = 0;
  size_t n_scored = 0, top1_same = 0;
  std::vector<float> logits, base_row(n_vocab);
  std::vector<double> lp, lq;
  for (size_t c = 0; c < n_chunks; ++c) {
    std::vector<int32_t> chunk(ids.begin() + long(c * n_ctx), ids.begin() + long((c + 1) * n_ctx));
    if (om.tok->bos() >= 0) chunk[0] = om.tok->bos();
    f.truncate(0);
    if (Status s = f.eval(chunk, runtime::Logits::all, logits); !s) {
      log::error("{}", s.message());
      return 1;
    }
    for (uint32_t j = first; j + 1 < n_ctx; ++j) {
      const float* row = logits.data() + size_t(j) * n_vocab;
      runtime::log_softmax(row, n_vocab, lp);
      nll -= lp[size_t(chunk[j + 1])];
      ++n_scored;
      if (save && std::fwrite(row, 4, n_vocab, save) != n_vocab) {
        log::error("{}: write failed", a.save_logits);
        return 1;
      }
      if (base) {
        if (std::fread(base_row.data(), 4, n_vocab, base) != n_vocab) {
          log::error("{}: ends before position {} (saved from another text, -c or vocabulary?)", a.kl_base, n_scored);
          return 1;
        }
        runtime::log_softmax(base_row.data(), n_vocab, lq);
        double kl = 0;
        for (size_t i = 0; i < n_vocab; ++i) kl += std::exp(lq[i]) * (lq[i] - lp[i]);
        kl_sum += kl;
        const size_t am = size_t(std::max_element(row, row + n_vocab) - row);
        const size_t bm = size_t(std::max_element(base_row.begin(), base_row.end()) - base_row.begin());
        top1_same += am == bm;
      }
    }
    fmt::print(stderr, "[{}]{:.4f} ", c + 1, std::exp(nll / double(n_scored)));
  }
  fmt::print(stderr, "\n");
  if (save) std::fclose(save);
  if (base) std::fclose(base);
  const double ppl = std::exp(nll / double(n_scored));
  fmt::print("perplexity: {:.4f} over {} tokens ({} chunks of {})\n", ppl, n_scored, n_chunks, n_ctx);
  if (base)
    fmt::print("KL divergence vs {}: mean {:.6f}; top-1 agreement {:.2f}%\n", a.kl_base, kl_sum / double(n_scored),
               100.0 * double(top1_same) / double(n_scored));
  return 0;
}

}  // namespace

Command add_perplexity(CLI::App& app) {
  auto a = std::make_shared<PerplexityArgs>();
  auto* sub = app.add_subcommand("perplexity", "Perplexity of a text file (llama.cpp's method), and KL divergence "
                                               "against saved logits");
  a->m.add_to(sub);
  sub->add_option("-f,--file", a->file, "Text file")->required();
  sub->add_option("--chunks", a->max_chunks, "Score at most this many chunks");
  sub->add_option("--save-logits", a->save_logits, "Save the scored positions' logits (float32) for --kl-base");
  sub->add_option("--kl-base", a->kl_base, "Compare with logits saved by --save-logits: KL divergence, top-1");
  return {sub, [a] { return run_perplexity(*a); }};
}

}  // namespace strata::cli
