#include "tokenizer/pretokenize.h"

#include "tokenizer/unicode.h"

namespace strata::tokenizer {
namespace {

// The text as code points with classes precomputed; positions past the end read as "none".
class Chars {
 public:
  explicit Chars(std::string_view text) : chars_(utf8_chars(text)) {
    cls_.reserve(chars_.size());
    for (const auto& c : chars_) {
      cls_.push_back(is_letter(c.cp)    ? kLetter
                     : is_number(c.cp)  ? kNumber
                     : is_whitespace(c.cp) ? kSpace
                                        : kOther);
    }
  }
  size_t size() const { return chars_.size(); }
  uint32_t cp(size_t i) const { return i < chars_.size() ? chars_[i].cp : 0xFFFFFFFF; }
  bool letter(size_t i) const { return i < cls_.size() && cls_[i] == kLetter; }
  bool number(size_t i) const { return i < cls_.size() && cls_[i] == kNumber; }
  bool space(size_t i) const { return i < cls_.size() && cls_[i] == kSpace; }
  bool other(size_t i) const { return i < cls_.size() && cls_[i] == kOther; }  // [^\s\p{L}\p{N}]
  uint32_t offset(size_t i) const {
    return i < chars_.size() ? chars_[i].offset : end_offset();
  }

 private:
  uint32_t end_offset() const {
    return chars_.empty() ? 0 : chars_.back().offset + chars_.back().len;
  }
  enum Class : uint8_t { kLetter, kNumber, kSpace, kOther };
  std::vector<Utf8Char> chars_;
  std::vector<Class> cls_;
};

uint32_t lower_ascii(uint32_t cp) { return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp; }

// 's 't 're 've 'm 'll 'd at i: the match length in code points, 0 if none.
size_t match_contraction(const Chars& c, size_t i, bool ignore_case) {
  if (c.cp(i) != '\'') return 0;
  auto at = [&](size_t k) { return ignore_case ? lower_ascii(c.cp(k)) : c.cp(k); };
  const uint32_t a = at(i + 1);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  const uint32_t b = at(i + 2);
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

// \s+(?!\S) then \s+, at a whitespace char i: a run of whitespace followed by a non-space keeps
// its last char for the next word (" world"), unless the run is a single char.
size_t match_space_run(const Chars& c, size_t i) {
  size_t e = i;
  while (c.space(e)) ++e;
  if (e == c.size()) return e - i;  // run reaches the end: (?!\S) holds
  if (e - i >= 2) return e - i - 1;  // backtrack one so that (?!\S) holds
  return e - i;                      // \s+
}

size_t match_gpt2(const Chars& c, size_t i) {
  if (size_t n = match_contraction(c, i, false)) return n;
  const size_t j = c.cp(i) == ' ' ? i + 1 : i;
  if (c.letter(j)) {
    size_t e = j;
    while (c.letter(e)) ++e;
    return e - i;
  }
  if (c.number(j)) {
    size_t e = j;
    while (c.number(e)) ++e;
    return e - i;
  }
  if (c.other(j)) {
    size_t e = j;
    while (c.other(e)) ++e;
    return e - i;
  }
  return match_space_run(c, i);
}

size_t match_llama3(const Chars& c, size_t i, size_t max_digits) {
  if (size_t n = match_contraction(c, i, true)) return n;
  // [^\r\n\p{L}\p{N}]?\p{L}+
  {
    size_t j = i;
    const uint32_t cp = c.cp(i);
    if (!c.letter(i) && !c.number(i) && cp != '\r' && cp != '\n' && c.letter(i + 1)) j = i + 1;
    if (c.letter(j)) {
      size_t e = j;
      while (c.letter(e)) ++e;
      return e - i;
    }
  }
  // \p{N}{1,max}
  if (c.number(i)) {
    size_t e = i;
    while (c.number(e) && e - i < max_digits) ++e;
    return e - i;
  }
  //  ?[^\s\p{L}\p{N}]+[\r\n]*
  {
    const size_t j = c.cp(i) == ' ' ? i + 1 : i;
    if (c.other(j)) {
      size_t e = j;
      while (c.other(e)) ++e;
      while (c.cp(e) == '\r' || c.cp(e) == '\n') ++e;
      return e - i;
    }
  }
  // \s*[\r\n]+ : the longest whitespace prefix that ends in \r or \n
  if (c.space(i)) {
    size_t e = i, last_nl = 0;
    bool found = false;
    for (; c.space(e); ++e) {
      if (c.cp(e) == '\r' || c.cp(e) == '\n') {
        last_nl = e;
        found = true;
      }
    }
    if (found) return last_nl + 1 - i;
  }
  return match_space_run(c, i);
}

}  // namespace

std::optional<PreType> pre_type_from_name(std::string_view name) {
  if (name == "gpt-2" || name == "gpt2" || name == "default") return PreType::gpt2;
  if (name == "llama-bpe" || name == "llama3" || name == "llama-v3") return PreType::llama3;
  if (name == "qwen2" || name == "qwen3") return PreType::qwen2;
  return std::nullopt;
}

std::string_view pre_type_name(PreType t) {
  switch (t) {
    case PreType::gpt2: return "gpt-2";
    case PreType::llama3: return "llama-bpe";
    case PreType::qwen2: return "qwen2";
  }
  return "?";
}

std::vector<std::string_view> pretokenize(PreType type, std::string_view text) {
  const Chars c(text);
  std::vector<std::string_view> words;
  for (size_t i = 0; i < c.size();) {
    size_t n = 0;
    switch (type) {
      case PreType::gpt2: n = match_gpt2(c, i); break;
      case PreType::llama3: n = match_llama3(c, i, 3); break;
      case PreType::qwen2: n = match_llama3(c, i, 1); break;
    }
    if (n == 0) n = 1;  // every char matches some alternative; guard against a stall anyway
    const uint32_t begin = c.offset(i), end = c.offset(i + n);
    words.push_back(text.substr(begin, end - begin));
    i += n;
  }
  return words;
}

}  // namespace strata::tokenizer
