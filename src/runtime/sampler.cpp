#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

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
  // kLanes independent (max, index) pairs over strided elements, each keeping its first maximum;
  // then the largest of them, the smallest index among equals.
  constexpr size_t kLanes = 16;
  const float* l = logits.data();
  const size_t n = logits.size();
  float m[kLanes];
  int32_t at[kLanes];
  for (size_t j = 0; j < kLanes; ++j) m[j] = -std::numeric_limits<float>::infinity(), at[j] = -1;
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (size_t j = 0; j < kLanes; ++j) {
      const bool up = l[i + j] > m[j];
      m[j] = up ? l[i + j] : m[j];
      at[j] = up ? int32_t(i + j) : at[j];
    }
  }
  float best_m = -std::numeric_limits<float>::infinity();
  int32_t best = -1;
  for (size_t j = 0; j < kLanes; ++j)
    if (at[j] >= 0 && (best < 0 || m[j] > best_m || (m[j] == best_m && at[j] < best))) best_m = m[j], best = at[j];
  for (; i < n; ++i)
    if (l[i] > best_m) best_m = l[i], best = int32_t(i);
  // A row of -inf only (or all NaN): no lane moved; the first element, as max_element.
  return best < 0 ? 0 : best;
}

Sampler::Sampler(SamplerParams params, size_t n_vocab) : p_(params), n_vocab_(n_vocab), rng_(params.seed) {}

void Sampler::accept(int32_t token) {
  if (p_.repeat_last_n <= 0) return;
  recent_.push_back(token);
  while (recent_.size() > size_t(p_.repeat_last_n)) recent_.pop_front();
}

void Sampler::apply_penalty(std::span<float> logits) const {
  if (p_.repeat_penalty == 1.0f || recent_.empty()) return;
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

int32_t Sampler::sample(std::span<float> logits) {
  if (p_.temperature <= 0.0f) {
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
