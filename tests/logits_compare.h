// Reading reference token/logit files (tests/data/reference/models) and comparing logits the way
// testdata/README.md defines closeness: per position, max|got - ref| / max|ref|, and top-1
// agreement wherever the reference's top-1/top-2 gap is clear.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

namespace strata::test {

// A missing or empty reference file fails the test that reads it with the file's name (Catch
// reports the exception), instead of handing back nothing for the comparisons to divide by.
[[noreturn]] inline void missing_reference(const std::string& path) {
  throw std::runtime_error("test data missing or empty: " + path +
                           " (tests/data/reference/README.md lists the files; STRATA_TESTDATA points elsewhere)");
}

inline std::vector<int32_t> read_tokens(const std::string& path) {
  std::ifstream in(path);
  if (!in) missing_reference(path);
  std::vector<int32_t> t;
  int32_t x;
  while (in >> x) t.push_back(x);
  if (t.empty()) missing_reference(path);
  return t;
}

inline std::vector<float> read_f32(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) missing_reference(path);
  std::vector<char> bytes{std::istreambuf_iterator<char>(in), {}};
  if (bytes.size() < 4) missing_reference(path);
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}

struct LogitsDiff {
  double worst_ratio = 0;  // max over positions of max|got - ref| / max|ref|
  int top1_mismatch = 0;   // positions whose argmax differs although ref's top-2 gap > gap * max|ref|
  double kl_mean = 0;      // mean over positions of KL(softmax(ref) || softmax(got)), nats
  bool same_size = true;
};

// KL(softmax(p) || softmax(q)) of two logit rows, in double.
inline double kl_logits(const float* p, const float* q, size_t n) {
  double mp = -1e300, mq = -1e300;
  for (size_t i = 0; i < n; ++i) mp = std::max(mp, double(p[i])), mq = std::max(mq, double(q[i]));
  double zp = 0, zq = 0;
  for (size_t i = 0; i < n; ++i) zp += std::exp(double(p[i]) - mp), zq += std::exp(double(q[i]) - mq);
  const double lp = mp + std::log(zp), lq = mq + std::log(zq);
  double kl = 0;
  for (size_t i = 0; i < n; ++i) {
    const double a = double(p[i]) - lp, b = double(q[i]) - lq;
    kl += std::exp(a) * (a - b);
  }
  return std::max(0.0, kl);
}

inline LogitsDiff compare_logits(const std::vector<float>& got, const std::vector<float>& ref, size_t n_vocab,
                                 double gap) {
  LogitsDiff c;
  c.same_size = got.size() == ref.size();
  if (!c.same_size) return c;
  for (size_t p = 0; p < ref.size() / n_vocab; ++p) {
    const float* a = got.data() + p * n_vocab;
    const float* b = ref.data() + p * n_vocab;
    double max_ref = 0, max_diff = 0;
    size_t arg_a = 0, arg_b = 0;
    for (size_t i = 0; i < n_vocab; ++i) {
      max_ref = std::max(max_ref, std::fabs(double(b[i])));
      max_diff = std::max(max_diff, std::fabs(double(a[i]) - b[i]));
      if (a[i] > a[arg_a]) arg_a = i;
      if (b[i] > b[arg_b]) arg_b = i;
    }
    c.worst_ratio = std::max(c.worst_ratio, max_diff / max_ref);
    double second = -1e30;
    for (size_t i = 0; i < n_vocab; ++i)
      if (i != arg_b) second = std::max(second, double(b[i]));
    if (arg_a != arg_b && double(b[arg_b]) - second > gap * max_ref) ++c.top1_mismatch;
    c.kl_mean += kl_logits(b, a, n_vocab);
  }
  if (ref.size() >= n_vocab) c.kl_mean /= double(ref.size() / n_vocab);
  return c;
}

}  // namespace strata::test
