#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/max_at.h"

namespace strata::runtime {

Status SamplerParams::validate() const {
  if (!std::isfinite(temperature)) return Status::error("--temp must be a finite number");
  if (top_p <= 0.0f || top_p > 1.0f) return Status::error("--top-p must be in (0, 1] (got {})", top_p);
  if (min_p < 0.0f || min_p >= 1.0f) return Status::error("--min-p must be in [0, 1) (got {})", min_p);
  if (repeat_penalty <= 0.0f) return Status::error("--repeat-penalty must be > 0 (got {})", repeat_penalty);
  if (repeat_last_n < 0) return Status::error("--repeat-last-n must be >= 0 (got {})", repeat_last_n);
  return {};
}

int32_t argmax(std::span<const float> logits) {
  const kernels::cpu::MaxAt m = kernels::cpu::max_at(logits.data(), 0, int64_t(logits.size()));
  // A row of -inf only (or all NaN): the first element, as max_element.
  return m.index < 0 ? 0 : int32_t(m.index);
}

Sampler::Sampler(SamplerParams params, size_t n_vocab) : p_(params), n_vocab_(n_vocab), rng_(params.seed) {}

void Sampler::accept(int32_t token) {
  if (p_.repeat_last_n <= 0) return;
  recent_.push_back(token);
  while (recent_.size() > size_t(p_.repeat_last_n)) recent_.pop_front();
}

void Sampler::apply_penalty(std::span<float> logits) const {
  if (!penalises()) return;
  // Each distinct recent token once (CTRL-style: divide positive logits, multiply negative ones).
  std::vector<int32_t> seen(recent_.begin(), recent_.end());
  std::sort(seen.begin(), seen.end());
  seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
  for (int32_t t : seen) {
    if (t < 0 || size_t(t) >= logits.size()) continue;
    float& l = logits[size_t(t)];
    l = l > 0 ? l / p_.repeat_penalty : l * p_.repeat_penalty;
  }
}

std::vector<Sampler::Candidate> Sampler::filtered(std::span<float> logits) {
  apply_penalty(logits);
  std::vector<Candidate> c(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) c[i] = {int32_t(i), logits[i]};
  auto by_logit = [](const Candidate& a, const Candidate& b) { return a.p > b.p || (a.p == b.p && a.id < b.id); };
  size_t keep = c.size();
  if (p_.top_k > 0 && size_t(p_.top_k) < keep) keep = size_t(p_.top_k);
  std::partial_sort(c.begin(), c.begin() + long(keep), c.end(), by_logit);
  c.resize(keep);
  // Temperature-scaled softmax over what is left (llama.cpp applies temperature last, but the
  // filters below are defined on the same softmax, so order only matters for top_p/min_p on
  // the scaled distribution: we follow llama.cpp and filter on the unscaled probabilities).
  auto softmax = [&](float temp) {
    const float mx = c.front().p;
    double sum = 0;
    std::vector<float> p(c.size());
    for (size_t i = 0; i < c.size(); ++i) sum += p[i] = std::exp((c[i].p - mx) / temp);
    for (auto& x : p) x = float(x / sum);
    return p;
  };
  std::vector<float> prob = softmax(1.0f);
  if (p_.top_p < 1.0f) {
    double cum = 0;
    size_t n = 0;
    while (n < prob.size()) {
      cum += prob[n++];
      if (cum >= p_.top_p) break;
    }
    c.resize(n);
    prob.resize(n);
  }
  if (p_.min_p > 0.0f) {
    const float floor = p_.min_p * prob.front();
    size_t n = 1;
    while (n < prob.size() && prob[n] >= floor) ++n;
    c.resize(n);
  }
  prob = softmax(p_.temperature);
  for (size_t i = 0; i < c.size(); ++i) c[i].p = prob[i];
  return c;
}

std::vector<float> Sampler::distribution(std::span<float> logits) {
  std::vector<float> d(logits.size(), 0.0f);
  if (p_.temperature <= 0.0f) {
    apply_penalty(logits);
    d[size_t(argmax(logits))] = 1.0f;
    return d;
  }
  for (const auto& c : filtered(logits)) d[size_t(c.id)] = c.p;
  return d;
}

int32_t Sampler::sample(std::span<float> logits, int32_t known_argmax) {
  if (p_.temperature <= 0.0f) {
    if (known_argmax >= 0 && !penalises()) return known_argmax;
    apply_penalty(logits);
    return argmax(logits);
  }
  cand_ = filtered(logits);
  float u = rng_.uniform();
  for (const auto& c : cand_) {
    if (u < c.p) return c.id;
    u -= c.p;
  }
  return cand_.back().id;  // rounding left a sliver: the last candidate
}

void log_softmax(const float* l, size_t n, std::vector<double>& out) {
  double mx = l[0];
  for (size_t i = 1; i < n; ++i) mx = std::max(mx, double(l[i]));
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += std::exp(double(l[i]) - mx);
  const double lse = mx + std::log(sum);
  out.resize(n);
  for (size_t i = 0; i < n; ++i) out[i] = double(l[i]) - lse;
}

}  // namespace strata::runtime
