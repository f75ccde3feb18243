#include "tokenizer/normalize.h"

#include <algorithm>
#include <vector>

#include "tokenizer/unicode.h"

namespace strata::tokenizer {
namespace {

struct Decomp {
  uint32_t cp, first, second;  // second 0: singleton decomposition
};
struct CombiningRange {
  uint32_t first, last, ccc;
};
struct Composite {
  uint32_t first, second, cp;
};

#include "normalize_tables.inc"

// Hangul syllables decompose and compose algorithmically (Unicode ch. 3.12).
constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr uint32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount,
                   kSCount = kLCount * kNCount;

uint32_t combining_class(uint32_t cp) {
  if (cp < 0x300) return 0;
  auto it = std::lower_bound(std::begin(kCombiningClasses), std::end(kCombiningClasses), cp,
                             [](const CombiningRange& r, uint32_t v) { return r.last < v; });
  return (it != std::end(kCombiningClasses) && it->first <= cp) ? it->ccc : 0;
}

const Decomp* find_decomposition(uint32_t cp) {
  auto it = std::lower_bound(std::begin(kDecompositions), std::end(kDecompositions), cp,
                             [](const Decomp& d, uint32_t v) { return d.cp < v; });
  return (it != std::end(kDecompositions) && it->cp == cp) ? &*it : nullptr;
}

void decompose(uint32_t cp, std::vector<uint32_t>& out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const uint32_t s = cp - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount) out.push_back(kTBase + s % kTCount);
    return;
  }
  if (const Decomp* d = find_decomposition(cp)) {
    decompose(d->first, out);
    if (d->second) decompose(d->second, out);
    return;
  }
  out.push_back(cp);
}

// The primary composite of (a, b), or 0.
uint32_t compose_pair(uint32_t a, uint32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount)
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase &&
      b < kTBase + kTCount)
    return a + (b - kTBase);
  auto it = std::lower_bound(std::begin(kComposites), std::end(kComposites), std::pair(a, b),
                             [](const Composite& c, std::pair<uint32_t, uint32_t> v) {
                               return c.first < v.first || (c.first == v.first && c.second < v.second);
                             });
  return (it != std::end(kComposites) && it->first == a && it->second == b) ? it->cp : 0;
}

// NFC of a run of valid code points.
void nfc_run(const std::vector<uint32_t>& cps, std::string& out) {
  std::vector<uint32_t> d;
  d.reserve(cps.size() + 8);
  for (uint32_t cp : cps) decompose(cp, d);
  // Canonical ordering: stable-sort each run of non-starters by combining class.
  for (size_t i = 0; i < d.size();) {
    if (combining_class(d[i]) == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < d.size() && combining_class(d[j]) != 0) ++j;
    std::stable_sort(d.begin() + i, d.begin() + j,
                     [](uint32_t a, uint32_t b) { return combining_class(a) < combining_class(b); });
    i = j;
  }
  // Canonical composition: a char combines with the last starter unless blocked (a char between
  // them has a class >= its own, or is a starter).
  std::vector<uint32_t> r;
  r.reserve(d.size());
  int64_t starter = -1;
  uint32_t last_ccc = 0;
  for (uint32_t cp : d) {
    const uint32_t ccc = combining_class(cp);
    if (starter >= 0) {
      const bool adjacent = size_t(starter) + 1 == r.size();
      if (adjacent || (last_ccc != 0 && last_ccc < ccc)) {
        if (uint32_t c = compose_pair(r[starter], cp)) {
          r[starter] = c;
          continue;
        }
      }
    }
    if (ccc == 0) starter = int64_t(r.size());
    last_ccc = ccc;
    r.push_back(cp);
  }
  for (uint32_t cp : r) utf8_append(out, cp);
}

}  // namespace

std::string nfc(std::string_view text) {
  // Fast path: ASCII is NFC whatever follows it, and ASCII text is the common case.
  bool simple = true;
  for (char c : text) {
    if (uint8_t(c) >= 0x80) {
      simple = false;
      break;
    }
  }
  if (simple) return std::string(text);

  std::string out;
  out.reserve(text.size());
  std::vector<uint32_t> run;
  for (size_t i = 0; i < text.size();) {
    const Utf8Char c = utf8_decode_at(text, i);
    const bool malformed = c.cp == kReplacementChar && c.len == 1 && uint8_t(text[i]) >= 0x80;
    if (malformed) {  // flush and keep the raw byte
      nfc_run(run, out);
      run.clear();
      out += text[i];
    } else {
      run.push_back(c.cp);
    }
    i += c.len;
  }
  nfc_run(run, out);
  return out;
}

}  // namespace strata::tokenizer
