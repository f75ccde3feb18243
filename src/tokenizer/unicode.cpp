#include "tokenizer/unicode.h"

#include <algorithm>
#include <array>

namespace strata::tokenizer {
namespace {

struct CodepointRange {
  uint32_t first, last;
};

#include "unicode_tables.inc"

template <size_t N>
bool in_ranges(const CodepointRange (&ranges)[N], uint32_t cp) {
  // Ranges are sorted and disjoint: find the first range whose last >= cp.
  auto it = std::lower_bound(std::begin(ranges), std::end(ranges), cp,
                             [](const CodepointRange& r, uint32_t v) { return r.last < v; });
  return it != std::end(ranges) && it->first <= cp;
}

struct ByteLevelTables {
  std::array<uint32_t, 256> to_cp{};
  std::array<int16_t, 512> from_cp{};  // every mapped code point is < 0x200
  ByteLevelTables() {
    from_cp.fill(-1);
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      to_cp[b] = printable ? uint32_t(b) : next++;
      from_cp[to_cp[b]] = int16_t(b);
    }
  }
};

const ByteLevelTables& byte_level() {
  static const ByteLevelTables t;
  return t;
}

}  // namespace

size_t utf8_complete_prefix(std::string_view s) {
  size_t i = s.size();
  for (size_t back = 0; back < 4 && i > 0; ++back) {
    const unsigned char c = static_cast<unsigned char>(s[i - 1]);
    if ((c & 0xC0) != 0x80) {  // a lead byte or ASCII: is its sequence complete?
      const size_t need = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
      return back + 1 >= need ? s.size() : i - 1;
    }
    --i;
  }
  return s.size();
}

size_t utf8_len_at(std::string_view s, size_t i) { return utf8_decode_at(s, i).len; }

Utf8Char utf8_decode_at(std::string_view s, size_t i) {
  const auto b0 = uint8_t(s[i]);
  const Utf8Char bad{kReplacementChar, uint32_t(i), 1};
  if (b0 < 0x80) return {b0, uint32_t(i), 1};
  int n;
  uint32_t cp, min;
  if ((b0 & 0xE0) == 0xC0) { n = 2; cp = b0 & 0x1F; min = 0x80; }
  else if ((b0 & 0xF0) == 0xE0) { n = 3; cp = b0 & 0x0F; min = 0x800; }
  else if ((b0 & 0xF8) == 0xF0) { n = 4; cp = b0 & 0x07; min = 0x10000; }
  else return bad;
  if (i + n > s.size()) return bad;
  for (int k = 1; k < n; ++k) {
    const auto b = uint8_t(s[i + k]);
    if ((b & 0xC0) != 0x80) return bad;
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return bad;
  return {cp, uint32_t(i), uint32_t(n)};
}

std::vector<Utf8Char> utf8_chars(std::string_view s) {
  std::vector<Utf8Char> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    out.push_back(utf8_decode_at(s, i));
    i += out.back().len;
  }
  return out;
}

void utf8_append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

std::string utf8_encode(uint32_t cp) {
  std::string s;
  utf8_append(s, cp);
  return s;
}

bool is_letter(uint32_t cp) {
  if (cp < 0x80) return (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z';
  return in_ranges(kLetterRanges, cp);
}

bool is_number(uint32_t cp) {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  return in_ranges(kNumberRanges, cp);
}

bool is_whitespace(uint32_t cp) {
  switch (cp) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x20: case 0x85: case 0xA0:
    case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

uint32_t byte_to_unicode(uint8_t b) { return byte_level().to_cp[b]; }

int unicode_to_byte(uint32_t cp) { return cp < 512 ? byte_level().from_cp[cp] : -1; }

std::string bytes_to_byte_level(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) utf8_append(out, byte_to_unicode(uint8_t(c)));
  return out;
}

}  // namespace strata::tokenizer
