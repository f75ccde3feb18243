// Unicode helpers for the tokenizers: UTF-8 <-> code points, the character classes the
// pre-tokenizer regexes use (\p{L}, \p{N}, \s), and GPT-2's byte-level alphabet.
//
// Malformed UTF-8 never fails: a byte that does not start a valid sequence decodes as one code
// point U+FFFD covering that single byte, so offsets always advance and every input byte belongs to
// exactly one code point (the tokenizers keep the original bytes of each code point).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace strata::tokenizer {

inline constexpr uint32_t kReplacementChar = 0xFFFD;

// One code point of a UTF-8 string: its value and the bytes [offset, offset + len) it came from.
struct Utf8Char {
  uint32_t cp;
  uint32_t offset;
  uint32_t len;
};

// Length in bytes of the UTF-8 sequence starting at s[i] (1..4; 1 for malformed input).
size_t utf8_len_at(std::string_view s, size_t i);
// Decodes the sequence starting at s[i]; malformed -> {kReplacementChar, len 1}.
Utf8Char utf8_decode_at(std::string_view s, size_t i);
std::vector<Utf8Char> utf8_chars(std::string_view s);
void utf8_append(std::string& out, uint32_t cp);
std::string utf8_encode(uint32_t cp);
// Bytes of s up to its last complete UTF-8 sequence: a token's piece may end inside a multi-byte
// character, and text streamed out (generate's stdout, the server's chunks) holds the rest back.
// A malformed byte counts as complete (it is never completed by what follows).
size_t utf8_complete_prefix(std::string_view s);

bool is_letter(uint32_t cp);      // general category L*
bool is_number(uint32_t cp);      // general category N*
bool is_whitespace(uint32_t cp);  // Unicode White_Space (what \s means in the pre-tokenizers)

// GPT-2 byte-level BPE: every byte maps to one printable code point (printable Latin-1 bytes map
// to themselves, the others to U+0100 + n), so that byte strings become token text.
uint32_t byte_to_unicode(uint8_t b);
// Inverse; -1 when cp is not in the byte-level alphabet.
int unicode_to_byte(uint32_t cp);
// Byte string -> byte-level text (UTF-8 of the mapped code points).
std::string bytes_to_byte_level(std::string_view bytes);

}  // namespace strata::tokenizer
