#include "session/batch_runner.h"

#include <chrono>

#include <nlohmann/json.hpp>

#include "batch/chunking.h"
#include "batch/shard.h"
#include "session/decode.h"
#include "session/interrupt.h"

namespace strata::session {
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

std::vector<int32_t> JobRunner::pass_prompt(const Prompt& p, std::span<const int32_t> input) const {
  std::vector<int32_t> prompt = p.head;
  prompt.insert(prompt.end(), input.begin(), input.end());
  prompt.insert(prompt.end(), p.tail.begin(), p.tail.end());
  return prompt;
}

int32_t JobRunner::next_token(Stream& s) {
  Generation& g = s.g;
  if (g.ids.size() >= s.max_tokens) return -1;
  if (interrupted()) {
    g.interrupted = true;
    return -1;
  }
  const int32_t next = s.sampler.sample(s.logits);
  s.sampler.accept(next);
  return take_token(s, next);
}

int32_t JobRunner::take_token(Stream& s, int32_t next, bool check_context) {
  Generation& g = s.g;
  if (tok_.is_eog(next)) {
    g.stop = "eos";
    return -1;
  }
  g.ids.push_back(next);
  if (progress_) progress_->tokens(1);
  if (g.ids.size() == s.max_tokens) return -1;  // no forward pass for a token nobody will read
  if (check_context && engine_.n_past(s.seq) >= engine_.n_ctx()) {
    g.stop = "context";
    return -1;
  }
  return next;
}

Result<JobRunner::Generation> JobRunner::generate(const std::vector<int32_t>& prompt, uint32_t max_tokens,
                                                  const runtime::SamplerParams& sp, uint32_t seq) {
  engine_.truncate(seq, 0);  // a fresh sequence: the previous job's KV is forgotten, not freed
  if (opt_.spec.mode != spec::SpecMode::none && seq == 0 && (opt_.spec_sampled || sp.temperature <= 0.0f))
    return generate_speculative(prompt, max_tokens, sp);
  Stream s(sp, engine_.model().spec.hp.n_vocab, max_tokens, seq);
  for (int32_t id : prompt) s.sampler.accept(id);
  auto t0 = Clock::now();
  STRATA_TRY(engine_.eval(seq, prompt, runtime::Logits::last, s.logits));
  s.g.prefill_ms = ms_since(t0);
  t0 = Clock::now();
  for (int32_t next; (next = next_token(s)) >= 0;)
    STRATA_TRY(engine_.eval(seq, std::span(&next, 1), runtime::Logits::last, s.logits));
  s.g.decode_ms = ms_since(t0);
  return std::move(s.g);
}

Result<JobRunner::Generation> JobRunner::generate_speculative(const std::vector<int32_t>& prompt, uint32_t max_tokens,
                                                              const runtime::SamplerParams& sp) {
  runtime::Sampler sampler(sp, engine_.model().spec.hp.n_vocab);
  for (int32_t id : prompt) sampler.accept(id);
  auto dec = make_decoder(engine_, sampler, opt_.spec);
  if (!dec) return dec.status();
  Generation g;
  auto on_token = [&](int32_t t) {
    g.ids.push_back(t);
    if (progress_) progress_->tokens(1);
  };
  auto r = decode(engine_, **dec, prompt, &tok_, {int32_t(max_tokens), false}, on_token, interrupted);
  if (!r) return r.status();
  // decode()'s stop reasons in the words of plain generation (next_token / take_token).
  const std::string_view stop = r->stop;
  g.stop = stop == "end of text" ? "eos" : stop == "context full" ? "context" : "length";
  g.interrupted = stop == "interrupted";
  g.prefill_ms = r->prompt_s * 1e3;
  g.decode_ms = r->gen_s * 1e3;
  const spec::SpecStats& st = (*dec)->stats();
  uint64_t drafted = 0, accepted = 0;
  for (const auto& d : st.drafters) drafted += d.drafted, accepted += d.accepted;
  g.speculative = {{"spec", opt_.spec.text()},
                   {"drafted", drafted},
                   {"accepted", accepted},
                   {"rate", drafted ? double(accepted) / double(drafted) : 0.0},
                   {"verify_passes", st.verify_passes},
                   {"plain_steps", st.plain_steps}};
  return g;
}

Result<JobRunner::Setup> JobRunner::setup(const batch::Job& job) const {
  const std::string id = batch::printable(job.id);  // for messages
  auto text = batch::read_input(job);
  if (!text) return text.status();
  Setup su;
  su.p = make_prompt(job);
  su.input = tok_.encode(*text, false, false);
  if (su.input.empty()) return Status::error("job '{}': the input encodes to no tokens", id);
  const uint32_t n_ctx = engine_.n_ctx();
  const auto& p = su.p;
  const uint64_t fixed = p.head.size() + p.tail.size() + uint64_t(job.max_tokens);
  if (fixed >= n_ctx)
    return Status::error("job '{}': the prompt ({} tokens) plus max_tokens {} leave no room for the input in the "
                         "context of {} (raise -c or lower max_tokens)",
                         id, p.head.size() + p.tail.size(), job.max_tokens, n_ctx);
  // Input tokens that fit in one pass beside the prompt and the output.
  su.budget = uint32_t(n_ctx - fixed);

  auto& sp = su.sp;
  sp.temperature = job.sampling.temperature;
  sp.top_k = job.sampling.top_k;
  sp.top_p = job.sampling.top_p;
  sp.min_p = job.sampling.min_p;
  sp.repeat_penalty = job.sampling.repeat_penalty;
  // A job without a seed still reruns identically (resume must not change results).
  su.seed = job.sampling.seed ? *job.sampling.seed : opt_.run_seed ^ batch::id_hash(job.id);
  sp.seed = pass_seed(su.seed, 0);

  const size_t input_tokens = su.input.size();
  if (su.input.size() > su.budget) {
    switch (opt_.long_mode) {
      case LongMode::error:
        return Status::error("job '{}': the input has {} tokens, more than the {} that fit (context {}, prompt {}, "
                             "max_tokens {}); use --long map-reduce or truncate, or raise -c",
                             id, su.input.size(), su.budget, n_ctx, p.head.size() + p.tail.size(), job.max_tokens);
      case LongMode::truncate:
        su.input.resize(su.budget);  // keeps the beginning: where documents state what they are about
        su.long_info = {{"mode", "truncate"}, {"input_tokens", input_tokens}, {"kept_tokens", su.budget}};
        break;
      case LongMode::map_reduce: break;  // run() summarises chunks
    }
  }
  return su;
}

Result<JobResult> JobRunner::run(const batch::Job& job, uint32_t seq) {
  const auto t_job = Clock::now();
  const std::string id = batch::printable(job.id);  // for messages
  auto su = setup(job);
  if (!su) return su.status();
  std::vector<int32_t> input = std::move(su->input);
  const uint32_t budget = su->budget;
  Totals tot;
  uint32_t passes = 0;
  // One generation over head + input + tail; map-reduce runs several, each with its own seed.
  auto pass = [&](std::span<const int32_t> in) -> Result<Generation> {
    const std::vector<int32_t> prompt = pass_prompt(su->p, in);
    runtime::SamplerParams sp = su->sp;
    sp.seed = pass_seed(su->seed, passes);
    ++passes;
    auto g = generate(prompt, job.max_tokens, sp, seq);
    if (!g) return Status::error("job '{}': {}", id, g.message());
    tot.prompt_tokens += prompt.size();
    tot.output_tokens += g->ids.size();
    tot.prefill_ms += g->prefill_ms;
    tot.decode_ms += g->decode_ms;
    return g;
  };

  nlohmann::ordered_json long_info = su->long_info;
  const size_t input_tokens = input.size();
  if (input.size() > budget) {
    // Summarise overlapping chunks, join the summaries, and repeat on the joined text until it
    // fits one pass; the last pass (below) summarises the summaries.
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
  }
  auto g = pass(input);
  if (!g) return g.status();
  if (g->interrupted) return JobResult{true, {}, 0};
  return result(job, *g, tot, long_info, ms_since(t_job));
}

JobResult JobRunner::result(const batch::Job& job, const Generation& g, const Totals& t,
                            const nlohmann::ordered_json& long_info, double total_ms) const {
  nlohmann::ordered_json r;
  r["id"] = job.id;
  r["output"] = tok_.decode(g.ids, false);
  r["prompt_tokens"] = t.prompt_tokens;
  r["output_tokens"] = t.output_tokens;
  r["stop"] = g.stop;
  r["timings"] = {{"prefill_ms", round3(t.prefill_ms)},
                  {"decode_ms", round3(t.decode_ms)},
                  {"total_ms", round3(total_ms)},
                  {"decode_tok_s", t.decode_ms > 0 ? round3(double(t.output_tokens) * 1000 / t.decode_ms) : 0.0}};
  r["acceptance"] = g.speculative;  // null: decoded plainly (no --spec, throughput mode, or a sampled job)
  r["placement"] = {{"device", std::string(engine_.device_name())}, {"sessions", sessions_}};
  r["long"] = long_info;
  // A token may end inside a UTF-8 character: replace rather than fail the whole job.
  JobResult out;
  out.line = r.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  out.output_tokens = uint32_t(t.output_tokens);
  return out;
}

namespace {

// A job in flight in throughput mode.
struct Session {
  const batch::Job* job = nullptr;
  std::unique_ptr<JobRunner::Stream> stream;
  nlohmann::ordered_json long_info;
  uint64_t prompt_tokens = 0;
  Clock::time_point t_job, t_decode;
  int32_t pending = -1;  // the token this session feeds into the next batched step
};

}  // namespace

Status BatchScheduler::run(const NextJob& next, const Done& done) {
  runtime::Engine& e = r_.engine();
  const uint32_t n_vocab = e.model().spec.hp.n_vocab;
  std::vector<Session> slots(e.n_seq());
  bool more = true;
  size_t active = 0;
  // Hands a finished session's result (or error) on and frees its slot.
  auto finish = [&](uint32_t seq, Result<JobResult> r) -> bool {
    Session& s = slots[seq];
    const batch::Job& job = *s.job;
    s = Session{};
    --active;
    return done(job, std::move(r));
  };
  auto finish_ok = [&](uint32_t seq) -> bool {
    Session& s = slots[seq];
    auto& g = s.stream->g;
    g.decode_ms = ms_since(s.t_decode);
    JobRunner::Totals t{s.prompt_tokens, g.ids.size(), g.prefill_ms, g.decode_ms};
    return finish(seq, r_.result(*s.job, g, t, s.long_info, ms_since(s.t_job)));
  };
  std::vector<runtime::BatchRow> rows;
  std::vector<uint32_t> row_seq;
  std::vector<float> logits;
  while (true) {
    // Fill the free slots: prefill each new job alone on its sequence.
    for (uint32_t seq = 0; seq < slots.size() && more && !interrupted(); ++seq) {
      while (!slots[seq].job && more && !interrupted()) {
        const batch::Job* job = next();
        if (!job) {
          more = false;
          break;
        }
        Session& s = slots[seq];
        s.job = job;
        s.t_job = Clock::now();
        ++active;
        auto su = r_.setup(*job);
        if (!su) {
          if (!finish(seq, su.status())) return {};
          continue;
        }
        if (su->map_reduce()) {
          // Several passes: alone on this slot while the other sessions wait.
          auto r = r_.run(*job, seq);
          if (r && r->interrupted) return {};
          if (!finish(seq, std::move(r))) return {};
          continue;
        }
        const std::vector<int32_t> prompt = r_.pass_prompt(su->p, su->input);
        s.long_info = su->long_info;
        s.prompt_tokens = prompt.size();
        s.stream = std::make_unique<JobRunner::Stream>(su->sp, n_vocab, job->max_tokens, seq);
        for (int32_t id : prompt) s.stream->sampler.accept(id);
        e.truncate(seq, 0);
        const auto t0 = Clock::now();
        if (Status st = e.eval(seq, prompt, runtime::Logits::last, s.stream->logits); !st) {
          if (!finish(seq, Status::error("job '{}': {}", batch::printable(job->id), st.message()))) return {};
          continue;
        }
        s.stream->g.prefill_ms = ms_since(t0);
        s.t_decode = Clock::now();
        s.pending = r_.next_token(*s.stream);
        if (s.stream->g.interrupted) return {};
        if (s.pending < 0 && !finish_ok(seq)) return {};
      }
    }
    if (interrupted()) return {};  // the in-flight jobs are dropped; they run again on resume
    if (active == 0) {
      if (!more) return {};
      continue;
    }
    // One step: every in-flight session's next token through one sweep over the weights.
    rows.clear();
    row_seq.clear();
    for (uint32_t seq = 0; seq < slots.size(); ++seq)
      if (slots[seq].job && slots[seq].pending >= 0) {
        rows.push_back({seq, slots[seq].pending});
        row_seq.push_back(seq);
      }
    for (size_t r0 = 0; r0 < rows.size(); r0 += runtime::kMaxExactRows) {
      const size_t nr = std::min<size_t>(runtime::kMaxExactRows, rows.size() - r0);
      if (Status st = e.eval_batch(std::span(rows).subspan(r0, nr), logits); !st) {
        // Every session of the step fails as a single job would on an engine error.
        for (size_t i = r0; i < r0 + nr; ++i)
          if (!finish(row_seq[i], Status::error("job '{}': {}", batch::printable(slots[row_seq[i]].job->id),
                                                st.message())))
            return {};
        continue;
      }
      for (size_t i = 0; i < nr; ++i) {
        Session& s = slots[row_seq[r0 + i]];
        s.stream->logits.assign(logits.begin() + i * n_vocab, logits.begin() + (i + 1) * n_vocab);
      }
    }
    for (uint32_t seq = 0; seq < slots.size(); ++seq) {
      Session& s = slots[seq];
      if (!s.job || s.pending < 0) continue;
      s.pending = r_.next_token(*s.stream);
      if (s.stream->g.interrupted) return {};
      if (s.pending < 0 && !finish_ok(seq)) return {};
    }
  }
}

}  // namespace strata::session
