// strata bench kv-quality: what quantised KV costs in output quality. One sequence of ctx tokens
// (a text file, repeated to length, or random tokens) runs through engines that differ only in the
// KV cache type: f16 (the reference) and each tested type. They advance together chunk by chunk
// (Logits::all), so no logits are stored; per position the KL divergence KL(f16 || type) of the
// next-token distributions and the top-1 agreement are accumulated, over all positions and over
// the last quarter (where most keys are far back, the long-context regime).
#include <algorithm>
#include <cmath>
#include <fstream>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/bench_compare.h"
#include "cli/bench_kv_quality.h"
#include "cli/model_args.h"
#include "core/log.h"
#include "core/rng.h"
#include "kv/kv_quant.h"
#include "runtime/sampler.h"
#include "tokenizer/tokenizer.h"

namespace strata::cli {
namespace {

struct KvQualityArgs {
  ModelArgs m;
  std::string ctx_list = "4096", types = "q8,q4", text, json_out;
  bool past_train = false;
  uint64_t seed = 1;
  BenchCompare compare;
};

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

struct Stats {
  double kl = 0, kl_tail = 0, kl_max = 0;
  uint64_t agree = 0, agree_tail = 0, n = 0, n_tail = 0;
};

Result<std::vector<int32_t>> make_tokens(const KvQualityArgs& a, const runtime::Model& model, uint32_t ctx) {
  std::vector<int32_t> ids;
  if (!a.text.empty()) {
    std::ifstream in(a.text, std::ios::binary);
    if (!in) return Status::error("{}: cannot open", a.text);
    const std::string text{std::istreambuf_iterator<char>(in), {}};
    auto tok = tokenizer::Tokenizer::from_gguf(model.file);
    if (!tok) return tok.status();
    const std::vector<int32_t> all = tok->encode(text, false, false);
    if (all.empty()) return Status::error("{}: no tokens", a.text);
    while (ids.size() < ctx) ids.insert(ids.end(), all.begin(), all.begin() + std::min(all.size(), ctx - ids.size()));
  } else {
    Rng rng(a.seed);
    ids.resize(ctx);
    for (auto& t : ids) t = int32_t(rng.next_u32() % model.spec.hp.n_vocab);
  }
  return ids;
}

int run(KvQualityArgs& a) {
  if (Status s = a.compare.load("kv-quality"); !s) {
    log::error("{}", s.message());
    return 2;
  }
  const auto limit = a.m.thread_limit();
  if (!a.m.vram.empty()) {
    log::error("kv-quality runs resident engines (drop --vram)");
    return 2;
  }
  std::vector<std::pair<std::string, GgmlType>> tested;
  for (const auto& name : split_list(a.types)) {
    auto t = kv::kv_type_from_name(name);
    if (!t) {
      log::error("--types: unknown KV cache type '{}' (f32, f16, q8, q4)", name);
      return 2;
    }
    tested.emplace_back(kv::kv_type_name(*t), *t);
  }
  std::vector<uint32_t> ctxs;
  for (const auto& c : split_list(a.ctx_list)) {
    try {
      ctxs.push_back(uint32_t(std::stoul(c)));
    } catch (...) {
      log::error("--ctx: '{}' is not a token count", c);
      return 2;
    }
    if (ctxs.back() < 2) {
      log::error("--ctx: {} is too short", ctxs.back());
      return 2;
    }
  }
  if (tested.empty() || ctxs.empty()) {
    log::error("nothing to measure (--types and --ctx)");
    return 2;
  }
  auto loaded = runtime::Model::load(a.m.model);
  if (!loaded) {
    log::error("{}", loaded.message());
    return 1;
  }
  auto model = loaded.value();
  const uint32_t train = model->spec.hp.n_ctx_train;
  if (a.past_train && train > 0) {
    // The engines refuse contexts past the training length; this bench may go there on request:
    // the model extrapolates (RoPE), but every engine does so identically, so the comparison of
    // KV types stays fair. The model was created non-const by Model::load.
    const_cast<runtime::Model&>(*model).spec.hp.n_ctx_train = 0;
  }
  runtime::Device dev = runtime::Device::automatic;
  if (a.m.device == "cpu") dev = runtime::Device::cpu;
  else if (a.m.device == "cuda") dev = runtime::Device::cuda;
  else if (a.m.device != "auto") {
    log::error("unknown --device '{}' (auto, cpu, cuda)", a.m.device);
    return 2;
  }

  const size_t nv = model->spec.hp.n_vocab;
  nlohmann::json results = nlohmann::json::array();
  std::string device_name;
  for (uint32_t ctx : ctxs) {
    if (!a.past_train && train > 0 && ctx > train) {
      log::warn("ctx {} is past the model's training context ({}); measuring at {} (--past-train to go further)", ctx,
                train, train);
      ctx = train;
    }
    auto tokens = make_tokens(a, *model, ctx);
    if (!tokens) {
      log::error("{}", tokens.message());
      return 1;
    }
    std::vector<std::unique_ptr<runtime::Engine>> engines;  // [0]: f16 reference
    std::vector<GgmlType> kinds = {GgmlType::F16};
    for (const auto& [name, t] : tested) kinds.push_back(t);
    for (GgmlType t : kinds) {
      runtime::ForwardOptions fo;
      fo.n_ctx = ctx;
      fo.ubatch = std::min(a.m.ubatch, ctx);
      fo.k_type = fo.v_type = t;
      auto e = runtime::make_engine(model, fo, dev);
      if (!e) {
        log::error("KV {}: {}", kv::kv_type_name(t), e.message());
        return 1;
      }
      device_name = std::string((*e)->device_name());
      engines.push_back(std::move(e.value()));
    }
    log::info("kv-quality: {} tokens on {}, {} engines, chunks of {}", ctx, device_name, engines.size(),
              std::min(a.m.ubatch, ctx));
    std::vector<Stats> stats(tested.size());
    std::vector<std::vector<float>> logits(engines.size());
    std::vector<double> lp_ref, lp;
    const uint32_t tail0 = ctx - ctx / 4;
    const uint32_t chunk = std::min(a.m.ubatch, ctx);
    for (uint32_t done = 0; done < ctx; done += chunk) {
      const uint32_t n = std::min(chunk, ctx - done);
      const std::span<const int32_t> part(tokens->data() + done, n);
      for (size_t e = 0; e < engines.size(); ++e) {
        if (Status s = engines[e]->eval(part, runtime::Logits::all, logits[e]); !s) {
          log::error("{}", s.message());
          return 1;
        }
      }
      for (uint32_t r = 0; r < n; ++r) {
        const float* ref = logits[0].data() + size_t(r) * nv;
        runtime::log_softmax(ref, nv, lp_ref);
        const int32_t top_ref = runtime::argmax(std::span<const float>(ref, nv));
        const bool tail = done + r >= tail0;
        for (size_t t = 0; t < tested.size(); ++t) {
          const float* got = logits[t + 1].data() + size_t(r) * nv;
          runtime::log_softmax(got, nv, lp);
          double kl = 0;
          for (size_t i = 0; i < nv; ++i) kl += std::exp(lp_ref[i]) * (lp_ref[i] - lp[i]);
          kl = std::max(kl, 0.0);  // rounding can make an exact match a hair negative
          const bool same = runtime::argmax(std::span<const float>(got, nv)) == top_ref;
          Stats& s = stats[t];
          s.kl += kl, s.agree += same, ++s.n, s.kl_max = std::max(s.kl_max, kl);
          if (tail) s.kl_tail += kl, s.agree_tail += same, ++s.n_tail;
        }
      }
    }
    for (size_t t = 0; t < tested.size(); ++t) {
      const Stats& s = stats[t];
      results.push_back({{"ctx", ctx},
                         {"type", tested[t].first},
                         {"kl_mean", s.kl / double(s.n)},
                         {"kl_max", s.kl_max},
                         {"top1_agreement", double(s.agree) / double(s.n)},
                         {"kl_mean_last_quarter", s.n_tail ? s.kl_tail / double(s.n_tail) : 0.0},
                         {"top1_agreement_last_quarter", s.n_tail ? double(s.agree_tail) / double(s.n_tail) : 0.0},
                         {"positions", s.n}});
    }
  }
  fmt::print("{:>7} {:>5} {:>12} {:>12} {:>8} {:>14} {:>10}\n", "ctx", "kv", "KL mean", "KL max", "top-1",
             "KL last 1/4", "top-1 l/4");
  for (const auto& r : results)
    fmt::print("{:>7} {:>5} {:>12.3e} {:>12.3e} {:>7.2f}% {:>14.3e} {:>9.2f}%\n", r["ctx"].get<uint32_t>(),
               r["type"].get<std::string>(), r["kl_mean"].get<double>(), r["kl_max"].get<double>(),
               100 * r["top1_agreement"].get<double>(), r["kl_mean_last_quarter"].get<double>(),
               100 * r["top1_agreement_last_quarter"].get<double>());
  const nlohmann::json j = {{"bench", "kv-quality"},
                            {"model", a.m.model},
                            {"device", device_name},
                            {"reference", "f16"},
                            {"tokens", a.text.empty() ? "random" : a.text},
                            {"seed", a.seed},
                            {"past_train", a.past_train},
                            {"results", results}};
  return finish_bench(j, a.json_out, a.compare);
}

}  // namespace

std::function<int()> add_bench_kv_quality(CLI::App* bench) {
  auto a = std::make_shared<KvQualityArgs>();
  auto* sub = bench->add_subcommand("kv-quality", "KL divergence and top-1 agreement of the logits with quantised "
                                                  "KV (q8, q4) against f16 KV, over a long sequence");
  sub->add_option("-m,--model", a->m.model, "GGUF model file")->required();
  sub->add_option("--ctx", a->ctx_list, "Sequence lengths, comma-separated (e.g. 4096,32768)")->capture_default_str();
  sub->add_option("--types", a->types, "KV types compared with f16, comma-separated")->capture_default_str();
  sub->add_option("-f,--file", a->text, "Text to evaluate (repeated to length; default: random tokens)");
  sub->add_option("--seed", a->seed, "Seed of the random tokens")->capture_default_str();
  sub->add_flag("--past-train", a->past_train, "Allow lengths past the model's training context (RoPE extrapolation)");
  sub->add_option("-t,--threads", a->m.threads, "CPU threads (default: all cores)");
  a->m.ubatch = session::kDefaultUbatch;  // every KV type's engine chunks alike
  sub->add_option("-b,--ubatch", a->m.ubatch, "Tokens per chunk")->capture_default_str()->check(CLI::Range(1, 65536));
  sub->add_option("--device", a->m.device, "Where to run: auto, cpu, cuda")->capture_default_str();
  sub->add_option("--json", a->json_out, "Write the results as JSON to this file");
  a->compare.add_to(sub);
  return [a, sub]() -> int { return sub->parsed() ? run(*a) : -1; };
}

}  // namespace strata::cli
