// strata imatrix -m M.gguf -f text.txt -o M.imatrix [-c 512] [--chunks N]: an importance matrix
// for `strata quantize --imatrix` (and llama-quantize: the file is llama.cpp's GGUF imatrix format,
// model/imatrix.h). The text is tokenized once and cut into non-overlapping chunks of -c tokens,
// each starting with BOS and evaluated from scratch on the CPU engine (as `strata perplexity`
// does); a MatmulObserver adds the square of every matmul input element to its weight's column
// sums. By default the head is not evaluated (no logits are needed), so, as llama-imatrix by
// default, the output matrix gets no entry; --process-output (llama-imatrix's flag) runs it on
// every row, giving an entry under the name of the tensor it reads (token_embd.weight where the
// head is tied to the embedding: the largest matrix of a small model).
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <unordered_map>

#include "cli/command.h"
#include "core/log.h"
#include "model/imatrix.h"
#include "runtime/cpu_forward.h"
#include "runtime/model.h"
#include "tokenizer/tokenizer.h"

namespace strata::cli {
namespace {

struct ImatrixArgs {
  std::string model, file, out;
  uint32_t n_ctx = 512;
  int32_t max_chunks = -1;
  bool process_output = false;
};

// Sums x^2 per input column of every weight, found by its data pointer (the engine's views point
// into the model mapping, where the GGUF's tensors are). Sums in double: a column of a long run
// adds up millions of squares.
class Collector final : public runtime::MatmulObserver {
 public:
  explicit Collector(const gguf::File& file) {
    for (const auto& t : file.tensors())
      if (t.data && t.ne.size() >= 2) by_data_.emplace(t.data, Entry{t.name, std::vector<double>(t.ne[0], 0.0), 0});
  }
  void on_matmul(const kernels::WeightView& m, const float* x, uint32_t n) override {
    const auto it = by_data_.find(m.data);
    if (it == by_data_.end() || int64_t(it->second.sum2.size()) != m.n_in) return;
    Entry& e = it->second;
    for (uint32_t t = 0; t < n; ++t) {
      const float* row = x + int64_t(t) * m.n_in;
      for (int64_t j = 0; j < m.n_in; ++j) e.sum2[size_t(j)] += double(row[j]) * row[j];
    }
    e.rows += n;
  }
  // Entries with at least one row seen.
  void fill(model::Imatrix& out) const {
    for (const auto& [ptr, e] : by_data_) {
      if (e.rows == 0) continue;
      model::ImatrixEntry me;
      me.n_in = e.sum2.size();
      me.sum2.assign(e.sum2.begin(), e.sum2.end());
      me.counts = {float(e.rows)};
      out.entries.emplace(e.name, std::move(me));
    }
  }

 private:
  struct Entry {
    std::string name;
    std::vector<double> sum2;
    uint64_t rows;
  };
  std::unordered_map<const uint8_t*, Entry> by_data_;
};

int run_imatrix(const ImatrixArgs& a) {
  std::ifstream in(a.file, std::ios::binary);
  if (!in) {
    log::error("imatrix: {}: cannot open", a.file);
    return 1;
  }
  const std::string text{std::istreambuf_iterator<char>(in), {}};
  if (a.n_ctx < 2) {
    log::error("imatrix: -c {} is too short (give the chunk length, e.g. -c 512)", a.n_ctx);
    return 2;
  }
  auto model = runtime::Model::load(a.model);
  if (!model) {
    log::error("imatrix: {}", model.message());
    return 1;
  }
  auto tok = tokenizer::Tokenizer::from_gguf((*model)->file);
  if (!tok) {
    log::error("imatrix: {}: {}", a.model, tok.message());
    return 1;
  }
  runtime::ForwardOptions fo;
  fo.n_ctx = a.n_ctx;
  fo.ubatch = a.n_ctx;
  auto engine = runtime::CpuForward::create(*model, fo);
  if (!engine) {
    log::error("imatrix: {}", engine.message());
    return 1;
  }
  const std::vector<int32_t> ids = tok->encode(text, false, false);
  size_t n_chunks = ids.size() / a.n_ctx;
  if (a.max_chunks > 0) n_chunks = std::min(n_chunks, size_t(a.max_chunks));
  if (n_chunks == 0) {
    log::error("imatrix: {}: {} tokens, fewer than one chunk of {} (use a longer text or a smaller -c)", a.file,
               ids.size(), a.n_ctx);
    return 2;
  }
  Collector collector((*model)->file);
  (*engine)->set_matmul_observer(&collector);
  log::info("imatrix: {} tokens, {} chunks of {}", ids.size(), n_chunks, a.n_ctx);
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<float> logits;
  for (size_t c = 0; c < n_chunks; ++c) {
    std::vector<int32_t> chunk(ids.begin() + long(c * a.n_ctx), ids.begin() + long((c + 1) * a.n_ctx));
    if (tok->bos() >= 0) chunk[0] = tok->bos();
    (*engine)->truncate(0, 0);
    const auto which = a.process_output ? runtime::Logits::all : runtime::Logits::none;
    if (Status s = (*engine)->eval(0, chunk, which, logits); !s) {
      log::error("imatrix: chunk {}: {}", c + 1, s.message());
      return 1;
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    fmt::print(stderr, "\rimatrix: chunk {}/{} ({:.0f} tok/s)", c + 1, n_chunks, double((c + 1) * a.n_ctx) / secs);
  }
  fmt::print(stderr, "\n");
  (*engine)->set_matmul_observer(nullptr);
  model::Imatrix m;
  m.datasets = {a.file};
  m.chunk_count = uint32_t(n_chunks);
  m.chunk_size = a.n_ctx;
  collector.fill(m);
  if (Status s = model::write_imatrix(m, a.out); !s) {
    log::error("imatrix: {}", s.message());
    return 1;
  }
  log::info("wrote {}: {} entries, {} chunks of {} tokens", a.out, m.entries.size(), n_chunks, a.n_ctx);
  return 0;
}

}  // namespace

Command add_imatrix(CLI::App& app) {
  auto a = std::make_shared<ImatrixArgs>();
  auto* sub = app.add_subcommand("imatrix", "Importance matrix of a model over a text (llama.cpp's GGUF imatrix "
                                            "format) for quantize --imatrix");
  sub->add_option("-m,--model", a->model, "Model GGUF (f32/f16/bf16 or quantised)")->required();
  sub->add_option("-f,--file", a->file, "Calibration text")->required();
  sub->add_option("-o,--out", a->out, "Output imatrix GGUF")->required();
  sub->add_option("-c,--ctx", a->n_ctx, "Tokens per chunk")->capture_default_str();
  sub->add_option("--chunks", a->max_chunks, "Evaluate at most this many chunks");
  sub->add_flag("--process-output", a->process_output,
                "Also collect the head's input (every row through the head: slower), so that quantize weights the "
                "output matrix, or the embedding it is tied to, by importance too");
  return {sub, [a] { return run_imatrix(*a); }};
}

}  // namespace strata::cli
