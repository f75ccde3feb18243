#include "server/scheduler.h"

#include <chrono>
#include <optional>

#include "server/text_filter.h"
#include "session/batch_runner.h"
#include "session/decode.h"
#include "session/sequence_view.h"

namespace strata::server {
namespace {

using Clock = std::chrono::steady_clock;
uint64_t us_since(Clock::time_point t) {
  return uint64_t(std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t).count());
}

}  // namespace

// A request on one engine sequence.
struct Scheduler::Slot {
  std::optional<Job> job;  // empty: the sequence is free
  bool started = false;    // prefilled
  std::unique_ptr<session::JobRunner::Stream> stream;
  std::unique_ptr<TextFilter> text;
  size_t emitted = 0;      // generated tokens whose pieces went into `text`
  PendingLogprobs logprobs;  // with job->logprobs >= 0: entries waiting for their text
  int32_t pending = -1;    // the token this session feeds into the next batched step
  // --spec: the decoder of this session's rounds while it runs alone, made at its first round
  // (on the session's sampler, so a switch between rounds and batched steps keeps one sampler).
  std::unique_ptr<session::SequenceView> view;
  std::unique_ptr<spec::SpeculativeDecoder> dec;
};

Scheduler::Scheduler(runtime::Engine& engine, const tokenizer::Tokenizer& tok, Metrics& metrics,
                     uint32_t queue_limit, spec::SpecConfig spec)
    : engine_(engine),
      tok_(tok),
      metrics_(metrics),
      queue_limit_(queue_limit),
      spec_(spec),
      slots_(engine.n_seq()) {
  thread_ = std::thread([this] { loop(); });
}

Scheduler::~Scheduler() { drain(); }

Admit Scheduler::submit(Job job) {
  {
    std::lock_guard lock(mu_);
    if (draining_) return Admit::draining;
    // Room: the free sequences (their requests wait here until the next step) plus the queue.
    if (queue_.size() >= queue_limit_ + (slots_.size() - busy_)) return Admit::queue_full;
    queue_.push_back(std::move(job));
    metrics_.queued = uint32_t(queue_.size());
  }
  cv_.notify_all();
  return Admit::ok;
}

void Scheduler::drain() {
  {
    std::lock_guard lock(mu_);
    draining_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Scheduler::release(Slot& s, uint32_t seq) {
  engine_.truncate(seq, 0);  // the session's KV is forgotten; the next request overwrites it
  s = Slot{};
  std::lock_guard lock(mu_);
  --busy_;
  metrics_.running = busy_;
}

void Scheduler::finish(Slot& s, uint32_t seq, const char* reason) {
  std::string rest = s.text->flush();
  auto ticket = s.job->ticket;
  ticket->append(rest, s.logprobs.release_rest(s.text->text()));
  Usage u{uint32_t(s.job->prompt.size()), uint32_t(s.stream->g.ids.size())};
  // The session is released before its client hears of the end, so a client that has its answer
  // sees the metrics (running sessions, completed) with its request counted as finished.
  ++metrics_.completed;
  release(s, seq);
  ticket->finish(reason, u);
}

void Scheduler::step(Slot& s, uint32_t seq, session::JobRunner& runner) {
  // The sampler may change the logits in place (penalties): logprobs are the raw model's.
  if (s.job->logprobs >= 0) raw_logits_.assign(s.stream->logits.begin(), s.stream->logits.end());
  s.pending = runner.next_token(*s.stream);
  after_token(s, seq, raw_logits_);
}

// After next_token(): the new token's text (and logprobs) to the client, and the end when it came.
void Scheduler::after_token(Slot& s, uint32_t seq, std::span<const float> raw_logits) {
  auto& g = s.stream->g;
  const int32_t n_top = s.job->logprobs;
  const size_t n_vocab = engine_.model().spec.hp.n_vocab, first = s.emitted;
  bool stopped = false;
  // A speculative round brings several tokens: the text ends at the first stop string, and the
  // tokens after it are not generated (usage counts what plain decoding would have).
  for (; s.emitted < g.ids.size() && !stopped; ++s.emitted) {
    ++metrics_.generated_tokens;
    const int32_t id = g.ids[s.emitted];
    std::string piece = tok_.token_to_piece(id, false);
    stopped = s.text->append(piece);
    if (n_top < 0) continue;
    // Row i: the logits the step's i-th token was drawn from.
    TokenLogprob t = token_logprob(raw_logits.subspan((s.emitted - first) * n_vocab, n_vocab), id, uint32_t(n_top));
    t.chosen.piece = piece;
    for (TokenAlt& a : t.top) a.piece = tok_.token_to_piece(a.id, false);
    s.logprobs.push(std::move(t), piece.size());
  }
  if (stopped) g.ids.resize(s.emitted);
  std::string text = s.text->take();  // before release(): it moves sent()
  s.job->ticket->append(text, s.logprobs.release(s.text->text(), s.text->sent()));
  if (stopped) return finish(s, seq, "stop");
  // next_token's ends: "eos" (end of generation), "length" (max_tokens), "context" (full).
  if (s.pending < 0) finish(s, seq, std::string_view(g.stop) == "eos" ? "stop" : "length");
}

bool Scheduler::spec_step(Slot& s, uint32_t seq, session::JobRunner& runner) {
  if (!session::SequenceView::supports(spec_.mode, seq)) return false;
  auto& st = *s.stream;
  if (!s.dec) {
    s.view = std::make_unique<session::SequenceView>(engine_, seq);
    auto dec = session::make_decoder(*s.view, st.sampler, spec_);
    if (!dec) return false;  // cmd_serve checked the config against this engine
    s.dec = std::move(*dec);
    s.dec->keep_raw_logits(s.job->logprobs >= 0);
  }
  const std::vector<int32_t>& prompt = s.job->prompt;
  const std::vector<int32_t>& ids = st.g.ids;
  if (s.dec->history().size() != prompt.size() + ids.size()) {
    // Batched steps since its last round, or none yet: the decoder continues from here.
    std::vector<int32_t> history = prompt;
    history.insert(history.end(), ids.begin(), ids.end());
    s.dec->resume(history);
  }
  auto drafts = [](const spec::SpecStats& x) {
    std::pair<uint64_t, uint64_t> n{0, 0};
    for (const auto& d : x.drafters) n.first += d.drafted, n.second += d.accepted;
    return n;
  };
  const auto before = drafts(s.dec->stats());
  std::vector<int32_t> round;
  const auto t0 = Clock::now();
  // At most the tokens max_tokens leaves (the pending one is counted already).
  if (Status err = s.dec->step(st.max_tokens - uint32_t(ids.size()), round); !err) {
    s.job->ticket->fail(err.message());
    ++metrics_.failed;
    release(s, seq);
    return true;
  }
  metrics_.decode_us += us_since(t0);
  const auto after = drafts(s.dec->stats());
  ++metrics_.spec_rounds;
  metrics_.spec_tokens += round.size();
  metrics_.spec_drafted += after.first - before.first;
  metrics_.spec_accepted += after.second - before.second;
  // The round's tokens were sampled (or verified) and accepted by the session's sampler; they go
  // through next_token's ends one by one.
  for (size_t i = 0; i < round.size(); ++i)
    if ((s.pending = runner.take_token(st, round[i], i + 1 == round.size())) < 0) break;
  after_token(s, seq, s.dec->raw_logits());
  return true;
}

void Scheduler::start(Slot& s, uint32_t seq, session::JobRunner& runner) {
  Job& job = *s.job;
  s.started = true;
  s.text = std::make_unique<TextFilter>(job.stop);
  s.stream = std::make_unique<session::JobRunner::Stream>(job.sp, engine_.model().spec.hp.n_vocab, job.max_tokens,
                                                           seq);
  for (int32_t id : job.prompt) s.stream->sampler.accept(id);
  engine_.truncate(seq, 0);
  const auto t0 = Clock::now();
  if (Status st = engine_.eval(seq, job.prompt, runtime::Logits::last, s.stream->logits); !st) {
    job.ticket->fail(st.message());
    ++metrics_.failed;
    return release(s, seq);
  }
  metrics_.prefill_us += us_since(t0);
  metrics_.prompt_tokens += job.prompt.size();
  step(s, seq, runner);
}

void Scheduler::loop() {
  // next_token needs a runner for the engine and the tokenizer only (no chat, no progress). The
  // server never installs session/interrupt.h's handlers, so next_token's interrupted() is false:
  // SIGTERM drains (cmd_serve) instead of cutting sessions short.
  session::JobRunner runner(engine_, tok_, {}, nullptr);
  const uint32_t n_vocab = engine_.model().spec.hp.n_vocab;
  std::vector<runtime::BatchRow> rows;
  std::vector<uint32_t> row_seq;
  std::vector<float> logits;
  while (true) {
    // Between steps: free sequences take queued requests.
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return !queue_.empty() || busy_ > 0 || draining_; });
      if (queue_.empty() && busy_ == 0) return;  // draining, and nothing left
      for (Slot& s : slots_)
        if (!s.job && !queue_.empty()) {
          s.job = std::move(queue_.front());
          queue_.pop_front();
          ++busy_;
        }
      metrics_.running = busy_;
      metrics_.queued = uint32_t(queue_.size());
    }
    for (uint32_t seq = 0; seq < slots_.size(); ++seq) {
      Slot& s = slots_[seq];
      if (s.job && s.job->ticket->cancelled()) {
        ++metrics_.cancelled;
        release(s, seq);
      } else if (s.job && !s.started) {
        start(s, seq, runner);
      }
    }
    // Alone: a speculative round instead of a one-token step (the header says why only then).
    if (spec_.mode != spec::SpecMode::none) {
      uint32_t n = 0, lone = 0;
      for (uint32_t seq = 0; seq < slots_.size(); ++seq)
        if (slots_[seq].job && slots_[seq].pending >= 0) ++n, lone = seq;
      if (n == 1 && spec_step(slots_[lone], lone, runner)) continue;
    }
    // One step: every running session's next token through one sweep over the weights.
    rows.clear();
    row_seq.clear();
    for (uint32_t seq = 0; seq < slots_.size(); ++seq)
      if (slots_[seq].job && slots_[seq].pending >= 0) {
        rows.push_back({seq, slots_[seq].pending});
        row_seq.push_back(seq);
      }
    const auto t0 = Clock::now();
    for (size_t r0 = 0; r0 < rows.size(); r0 += runtime::kMaxExactRows) {
      const size_t nr = std::min<size_t>(runtime::kMaxExactRows, rows.size() - r0);
      if (Status st = engine_.eval_batch(std::span(rows).subspan(r0, nr), logits); !st) {
        for (size_t i = r0; i < r0 + nr; ++i) {  // every session of the failed step fails
          Slot& s = slots_[row_seq[i]];
          s.job->ticket->fail(st.message());
          ++metrics_.failed;
          release(s, row_seq[i]);
        }
        continue;
      }
      for (size_t i = 0; i < nr; ++i) {
        Slot& s = slots_[row_seq[r0 + i]];
        s.stream->logits.assign(logits.begin() + i * n_vocab, logits.begin() + (i + 1) * n_vocab);
      }
    }
    if (!rows.empty()) metrics_.decode_us += us_since(t0);
    for (uint32_t seq : row_seq) {
      Slot& s = slots_[seq];
      if (!s.job) continue;  // failed above
      step(s, seq, runner);
    }
  }
}

}  // namespace strata::server
