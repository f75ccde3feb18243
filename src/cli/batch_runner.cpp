#include "cli/batch_runner.h"

#include <chrono>

#include <nlohmann/json.hpp>

#include "batch/chunking.h"
#include "batch/shard.h"
#include "cli/interrupt.h"

namespace strata::cli {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }
double round3(double x) { return double(int64_t(x * 1000 + 0.5)) / 1000; }

}  // namespace

JobRunner::Prompt JobRunner::make_prompt(const batch::Job& job) const {
  // The user's parts of the prompt around the input.
  std::string before, after;
  if (!job.prompt_template.empty()) {
    const size_t at = job.prompt_template.find(batch::kInputMarker);
    before = job.prompt_template.substr(0, at);
    after = job.prompt_template.substr(at + batch::kInputMarker.size());
  } else if (!job.instruction.empty()) {
    before = job.instruction + "\n\n";
  }
  // Job text (instruction, template, input) is encoded without parsing control tokens, so a
  // document containing "<end_of_turn>" cannot end its turn; only the chat template's own text is.
  Prompt p;
  if (opt_.chat == tokenizer::ChatFamily::none) {
    p.head = tok_.encode(before, true, false);
    p.tail = tok_.encode(after, false, false);
    return p;
  }
  const std::string marker = "\x01strata-user-text\x01";
  const std::vector<tokenizer::ChatMessage> msgs = {{"user", marker}};
  const std::string text = tokenizer::apply_chat(opt_.chat, msgs, true);
  const size_t at = text.find(marker);
  p.head = tok_.encode(text.substr(0, at), true, true);
  const auto b = tok_.encode(before, false, false);
  p.head.insert(p.head.end(), b.begin(), b.end());
  p.tail = tok_.encode(after, false, false);
  const auto t = tok_.encode(text.substr(at + marker.size()), false, true);
  p.tail.insert(p.tail.end(), t.begin(), t.end());
  return p;
}

Result<JobRunner::Generation> JobRunner::generate(const std::vector<int32_t>& prompt, uint32_t max_tokens,
                                                  const runtime::SamplerParams& sp) {
  Generation g;
  engine_.truncate(0);  // a fresh sequence: the previous job's KV is forgotten, not freed
  runtime::Sampler sampler(sp, engine_.model().spec.hp.n_vocab);
  for (int32_t id : prompt) sampler.accept(id);
  std::vector<float> logits;
  auto t0 = Clock::now();
  STRATA_TRY(engine_.eval(prompt, runtime::Logits::last, logits));
  g.prefill_ms = ms_since(t0);
  t0 = Clock::now();
  while (g.ids.size() < max_tokens) {
    if (interrupted()) {
      g.interrupted = true;
      break;
    }
    const int32_t next = sampler.sample(logits);
    sampler.accept(next);
    if (tok_.is_eog(next)) {
      g.stop = "eos";
      break;
    }
    g.ids.push_back(next);
    if (progress_) progress_->tokens(1);
    if (g.ids.size() == max_tokens) break;  // no forward pass for a token nobody will read
    if (engine_.n_past() >= engine_.n_ctx()) {
      g.stop = "context";
      break;
    }
    STRATA_TRY(engine_.eval(std::span(&next, 1), runtime::Logits::last, logits));
  }
  g.decode_ms = ms_since(t0);
  return g;
}

Result<JobResult> JobRunner::run(const batch::Job& job) {
  const auto t_job = Clock::now();
  const std::string id = batch::printable(job.id);  // for messages
  auto text = batch::read_input(job);
  if (!text) return text.status();
  const Prompt p = make_prompt(job);
  std::vector<int32_t> input = tok_.encode(*text, false, false);
  if (input.empty()) return Status::error("job '{}': the input encodes to no tokens", id);
  const uint32_t n_ctx = engine_.n_ctx();
  const uint64_t fixed = p.head.size() + p.tail.size() + uint64_t(job.max_tokens);
  if (fixed >= n_ctx)
    return Status::error("job '{}': the prompt ({} tokens) plus max_tokens {} leave no room for the input in the "
                         "context of {} (raise -c or lower max_tokens)",
                         id, p.head.size() + p.tail.size(), job.max_tokens, n_ctx);
  // Input tokens that fit in one pass beside the prompt and the output.
  const uint32_t budget = uint32_t(n_ctx - fixed);

  runtime::SamplerParams sp;
  sp.temperature = job.sampling.temperature;
  sp.top_k = job.sampling.top_k;
  sp.top_p = job.sampling.top_p;
  sp.min_p = job.sampling.min_p;
  sp.repeat_penalty = job.sampling.repeat_penalty;
  // A job without a seed still reruns identically (resume must not change results).
  const uint64_t seed = job.sampling.seed ? *job.sampling.seed : opt_.run_seed ^ batch::id_hash(job.id);

  uint64_t prompt_tokens = 0, output_tokens = 0;
  double prefill_ms = 0, decode_ms = 0;
  uint32_t passes = 0;
  // One generation over head + input + tail; map-reduce runs several, each with its own seed.
  auto pass = [&](std::span<const int32_t> in) -> Result<Generation> {
    std::vector<int32_t> prompt = p.head;
    prompt.insert(prompt.end(), in.begin(), in.end());
    prompt.insert(prompt.end(), p.tail.begin(), p.tail.end());
    sp.seed = seed + uint64_t(passes) * 0x9e3779b97f4a7c15ull;
    ++passes;
    auto g = generate(prompt, job.max_tokens, sp);
    if (!g) return Status::error("job '{}': {}", id, g.message());
    prompt_tokens += prompt.size();
    output_tokens += g->ids.size();
    prefill_ms += g->prefill_ms;
    decode_ms += g->decode_ms;
    return g;
  };

  nlohmann::ordered_json long_info = nullptr;
  const size_t input_tokens = input.size();
  if (input.size() > budget) {
    switch (opt_.long_mode) {
      case LongMode::error:
        return Status::error("job '{}': the input has {} tokens, more than the {} that fit (context {}, prompt {}, "
                             "max_tokens {}); use --long map-reduce or truncate, or raise -c",
                             id, input.size(), budget, n_ctx, p.head.size() + p.tail.size(), job.max_tokens);
      case LongMode::truncate:
        input.resize(budget);  // keeps the beginning: where documents state what they are about
        long_info = {{"mode", "truncate"}, {"input_tokens", input_tokens}, {"kept_tokens", budget}};
        break;
      case LongMode::map_reduce: {
        // Summarise overlapping chunks, join the summaries, and repeat on the joined text until
        // it fits one pass; the last pass (below) summarises the summaries.
        const std::vector<int32_t> sep = tok_.encode("\n\n", false, false);
        const uint32_t overlap = std::min(opt_.overlap, budget / 4);
        size_t first_chunks = 0, levels = 0;
        while (input.size() > budget) {
          auto spans = batch::plan_chunks(uint32_t(input.size()), budget, overlap);
          if (!spans) return Status::error("job '{}': {}", id, spans.message());
          if (levels == 0) first_chunks = spans->size();
          std::vector<int32_t> joined;
          for (const auto& s : *spans) {
            auto g = pass(std::span(input).subspan(s.begin, s.end - s.begin));
            if (!g) return g.status();
            if (g->interrupted) return JobResult{true, {}, 0};
            if (!joined.empty()) joined.insert(joined.end(), sep.begin(), sep.end());
            joined.insert(joined.end(), g->ids.begin(), g->ids.end());
          }
          ++levels;
          if (joined.size() >= input.size())
            return Status::error("job '{}': map-reduce does not shrink the input ({} tokens of summaries from {} "
                                 "tokens); lower max_tokens or raise -c",
                                 id, joined.size(), input.size());
          input = std::move(joined);
        }
        long_info = {{"mode", "map-reduce"}, {"input_tokens", input_tokens}, {"chunks", first_chunks},
                     {"levels", levels}, {"passes", passes + 1}};
        break;
      }
    }
  }
  auto g = pass(input);
  if (!g) return g.status();
  if (g->interrupted) return JobResult{true, {}, 0};

  nlohmann::ordered_json r;
  r["id"] = job.id;
  r["output"] = tok_.decode(g->ids, false);
  r["prompt_tokens"] = prompt_tokens;
  r["output_tokens"] = output_tokens;
  r["stop"] = g->stop;
  r["timings"] = {{"prefill_ms", round3(prefill_ms)},
                  {"decode_ms", round3(decode_ms)},
                  {"total_ms", round3(ms_since(t_job))},
                  {"decode_tok_s", decode_ms > 0 ? round3(double(output_tokens) * 1000 / decode_ms) : 0.0}};
  r["acceptance"] = nullptr;  // speculative decoding is not in the batch path yet
  r["placement"] = {{"device", std::string(engine_.device_name())}, {"sessions", 1}};
  r["long"] = long_info;
  // A token may end inside a UTF-8 character: replace rather than fail the whole job.
  JobResult out;
  out.line = r.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  out.output_tokens = uint32_t(output_tokens);
  return out;
}

}  // namespace strata::cli
