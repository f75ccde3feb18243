// strata generate: text generation on the command line. Text streams to stdout; the setup line and
// timings go to stderr, so `strata generate ... > out.txt` captures only the text.
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <random>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/model_args.h"
#include "cli/output_file.h"
#include "cli/placement_report.h"
#include "core/log.h"
#include "core/text_file.h"
#include "runtime/sampler.h"
#include "session/decode.h"
#include "session/default_spec.h"
#include "session/interrupt.h"
#include "session/prompt.h"
#include "session/run_plan.h"
#include "session/session.h"
#include "spec/speculative_decoder.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/unicode.h"

namespace strata::cli {
namespace {

struct GenerateArgs {
  ModelArgs m;
  std::string prompt, file, system;
  int32_t n_predict = -1;
  bool chat = false;
  bool ignore_eos = false;
  bool no_display_prompt = true;
  bool no_report = false;  // --no-report / -q
  runtime::SamplerParams sp;
  int64_t seed = -1;
  std::string json_out;       // --json: run figures, speculative statistics included
  bool spec_default = false;  // --spec not given: auto or none by the plan (session/default_spec.h)
};

// The placement report (cli/placement_report.h) for this run without a budget, on stderr: stdout
// carries only the generated text. The run shape carries the speculation of --spec
// (session::apply_speculation, as under --vram and in `strata plan --spec`). An infeasible plan is
// a warning, not a failure: without a budget the engine keeps every weight resident.
void print_report(const GenerateArgs& a, const offload::HardwareProfile& profile, const session::Session& s,
                  uint32_t n_prompt) {
  const auto& f = s.engine();
  auto blocks = offload::model_blocks(s.model().file, s.model().spec);  // the file opened once
  if (!blocks) {
    log::warn("placement report: {}", blocks.message());
    return;
  }
  const uint64_t gen = a.n_predict > 0 ? uint64_t(a.n_predict) : f.n_ctx() - std::min(n_prompt, f.n_ctx());
  auto p = print_placement_report(
      {std::move(*blocks), profile, offload::Budgets::of(profile), report_shape(s, n_prompt, gen)}, stderr);
  if (!p) log::warn("placement report: {}", p.message());
}

int run_generate(GenerateArgs a) {
  const auto limit = a.m.thread_limit();
  if (!a.prompt.empty() && !a.file.empty()) {
    log::error("give -p or -f, not both");
    return 2;
  }
  if (!a.file.empty()) {
    auto text = read_text_file(a.file, "prompt file");
    if (!text) {
      log::error("{}", text.message());
      return 1;
    }
    a.prompt = std::move(*text);
  }
  if (a.prompt.empty()) {
    log::error("empty prompt: give the text with -p TEXT or -f FILE");
    return 2;
  }
  if (a.seed < 0) a.seed = int64_t(std::random_device{}() & 0x7fffffff);
  a.sp.seed = uint64_t(a.seed);
  if (Status s = a.sp.validate(); !s) {
    log::error("{}", s.message());
    return 2;
  }

  const auto t_load = std::chrono::steady_clock::now();
  // The model file is opened once; --spec is parsed against it before anything is planned.
  OpenModel om;
  if (int rc = om.open(a.m, true)) return rc;
  auto& s = *om.session;
  const tokenizer::Tokenizer* tok = om.tok;
  const auto family = a.chat ? tokenizer::detect_chat_family(tok->chat_template()) : tokenizer::ChatFamily::none;
  if (a.chat && family == tokenizer::ChatFamily::none)
    log::warn("--chat: the model has no chat template strata knows; using the raw prompt");
  const std::vector<int32_t> prompt_ids = session::encode_prompt(*tok, a.prompt, family, a.system);
  if (prompt_ids.empty()) {
    log::error("the prompt encodes to no tokens");
    return 2;
  }
  const uint32_t want = uint32_t(prompt_ids.size()) + (a.n_predict > 0 ? uint32_t(a.n_predict) : 256u);
  // The profile is read before the engine allocates, so a detected GPU's free memory is the budget.
  std::optional<offload::HardwareProfile> profile;
  // With --vram the plan that places the weights is the report (Session::report_plan).
  if (!a.no_report && a.m.vram.empty()) {
    auto p = profile_or_detected(a.m.profile, a.m.device != "cpu");
    if (!p) {
      log::error("{}", p.message());
      return 1;
    }
    profile = std::move(*p);
  }
  if (int rc = om.open_engine(want)) return rc;
  auto& f = s.engine();
  if (prompt_ids.size() >= f.n_ctx()) {
    log::error("the prompt has {} tokens, more than the context of {} (raise -c)", prompt_ids.size(), f.n_ctx());
    return 2;
  }
  spec::SpecConfig spec_choice = s.spec();
  std::string spec_why;
  if (a.spec_default) {
    // No --spec: auto where the plan of this run predicts that drafts pay, else plain decoding.
    const uint64_t gen = a.n_predict > 0 ? uint64_t(a.n_predict) : f.n_ctx() - prompt_ids.size();
    auto d = default_speculation(s, profile, a.m.profile, a.m.device != "cpu", report_shape(s, prompt_ids.size(), gen));
    if (d) spec_choice = d->config, spec_why = d->decision.reason;
    else log::warn("default speculation: {}; decoding plainly", d.message());
  }
  const spec::SpecConfig* spec_cfg = &spec_choice;
  log::info("{} | ctx {} | prompt {} tokens | seed {} | temp {} | spec {}", f.model().spec.summary(), f.n_ctx(),
            prompt_ids.size(), a.seed, a.sp.temperature, spec_cfg->text());
  if (!spec_why.empty()) log::info("spec: {}", spec_why);
  if (profile) print_report(a, *profile, s, uint32_t(prompt_ids.size()));
  if (!a.no_report) s.report_plan();
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load).count();

  runtime::Sampler sampler(a.sp, f.model().spec.hp.n_vocab);
  for (int32_t id : prompt_ids) sampler.accept(id);
  auto dec = session::make_decoder(f, sampler, *spec_cfg);
  if (!dec) {
    log::error("{}", dec.message());
    return 2;
  }
  // SIGINT/SIGTERM stop between rounds: the text so far is flushed and the timings printed.
  session::install_interrupt_handlers();
  std::string pending;
  auto emit = [&](int32_t next) {
    pending += tok->token_to_piece(next, false);
    const size_t ready = tokenizer::utf8_complete_prefix(pending);
    std::fwrite(pending.data(), 1, ready, stdout);
    std::fflush(stdout);
    pending.erase(0, ready);
  };
  auto run = session::decode(f, **dec, prompt_ids, tok, {a.n_predict, a.ignore_eos}, emit, session::interrupted);
  if (!run) {
    log::error("{}", run.message());
    return 1;
  }
  std::fwrite(pending.data(), 1, pending.size(), stdout);
  std::fputs("\n", stdout);
  std::fflush(stdout);
  const double pp_s = run->prompt_s, tg_s = run->gen_s;
  const int32_t n_gen = run->n_gen;
  const char* stop = run->stop;
  log::info("load {:.2f} s | prompt {} tokens in {:.2f} s ({:.1f} tok/s) | generated {} tokens in {:.2f} s "
            "({:.2f} tok/s) | stop: {}",
            load_s, prompt_ids.size(), pp_s, double(prompt_ids.size()) / pp_s, n_gen, tg_s,
            tg_s > 0 ? double(n_gen) / tg_s : 0.0, stop);
  const auto& st = (*dec)->stats();
  if (spec_cfg->mode != spec::SpecMode::none) log::info("{}", st.summary());
  if (n_gen > 1)
    s.report_measured(double(n_gen - 1) / tg_s, run->streamed_bytes, tg_s, run->host_compute_s);
  if (!a.json_out.empty()) {
    nlohmann::json j = {{"model", a.m.model}, {"device", std::string(f.device_name())},
                        {"n_prompt", prompt_ids.size()}, {"n_gen", n_gen}, {"prompt_s", pp_s}, {"gen_s", tg_s},
                        {"gen_tok_per_s", tg_s > 0 ? double(n_gen) / tg_s : 0.0}, {"stop", stop},
                        {"seed", a.seed}, {"temperature", a.sp.temperature}, {"spec", spec_cfg->text()},
                        {"speculative", st.to_json()}};
    if (!spec_why.empty()) j["spec_default"] = spec_why;  // why the run took auto or none (no --spec)
    if (Status w = write_output_file(a.json_out, j.dump(2) + "\n"); !w) {
      log::error("{}", w.message());
      return 1;
    }
  }
  if (Status w = write_trace(s); !w) {
    log::error("{}", w.message());
    return 1;
  }
  return session::interrupt_exit_code();
}

}  // namespace

Command add_generate(CLI::App& app) {
  auto a = std::make_shared<GenerateArgs>();
  auto* sub = app.add_subcommand("generate", "Generate text from a prompt (streams to stdout; timings to stderr)");
  a->m.add_to(sub);
  sub->add_option("-p,--prompt", a->prompt, "Prompt text");
  sub->add_option("-f,--file", a->file, "Read the prompt from a file");
  sub->add_option("-n,--n-predict", a->n_predict, "Tokens to generate (-1: until end of text or full context)")
      ->capture_default_str();
  sub->add_flag("--chat", a->chat, "Wrap the prompt in the model's chat template (gemma, llama3, chatml)");
  sub->add_option("--system", a->system, "With --chat: a system message");
  sub->add_flag("--ignore-eos", a->ignore_eos, "Keep generating past end-of-text tokens");
  sub->add_option("--temp", a->sp.temperature, "Temperature (0: greedy)")->capture_default_str();
  sub->add_option("--top-k", a->sp.top_k, "Top-k (0: off)")->capture_default_str();
  sub->add_option("--top-p", a->sp.top_p, "Top-p (1: off)")->capture_default_str();
  sub->add_option("--min-p", a->sp.min_p, "Min-p (0: off)")->capture_default_str();
  sub->add_option("--repeat-penalty", a->sp.repeat_penalty, "Repetition penalty (1: off)")->capture_default_str();
  sub->add_option("--repeat-last-n", a->sp.repeat_last_n, "Tokens the penalty looks back over")->capture_default_str();
  sub->add_option("-s,--seed", a->seed, "Random seed (-1: random, printed)")->capture_default_str();
  auto* spec_opt = a->m.add_spec_to(sub, true);
  sub->add_option("--json", a->json_out, "Write the run's figures (and speculative statistics) as JSON to this file");
  sub->add_flag("-q,--no-report", a->no_report, "Do not print the placement report before generating");
  return {sub, [a, spec_opt] {
            a->spec_default = spec_opt->count() == 0;
            return run_generate(*a);
          }};
}

}  // namespace strata::cli
