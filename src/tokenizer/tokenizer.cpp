// Tokenizer: special-token partitioning around the SPM / BPE encoders, and decoding.
#include "tokenizer/tokenizer.h"

#include "tokenizer/normalize.h"
#include "tokenizer/unicode.h"
#include "tokenizer/vocab.h"

namespace strata::tokenizer {
namespace {

constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK

std::string escape_spaces(std::string_view text, bool prefix) {
  std::string s;
  s.reserve(text.size() + 8);
  if (prefix) s += kSpmSpace;
  for (char c : text) {
    if (c == ' ') s += kSpmSpace;
    else s += c;
  }
  return s;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

bool is_special_type(TokenType t) { return t == TokenType::control || t == TokenType::unknown; }

}  // namespace

Result<Tokenizer> Tokenizer::from_gguf(const gguf::File& file) {
  auto v = load_vocab(file);
  if (!v) return v.status().with_context(file.path());
  Tokenizer t;
  t.vocab_ = std::move(*v);
  return t;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special,
                                       bool parse_special) const {
  const Vocab& v = *vocab_;
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  if (add_special && v.add_bos) out.push_back(v.bos);

  bool after_special = true;  // SPM prefixes a space to text at the start or after a special token
  auto encode_fragment = [&](std::string_view frag) {
    if (frag.empty()) return;
    if (v.type == VocabType::spm) {
      spm_encode(v, escape_spaces(frag, v.add_space_prefix && after_special), out);
    } else if (v.nfc) {
      bpe_encode(v, nfc(frag), out);
    } else {
      bpe_encode(v, frag, out);
    }
    after_special = false;
  };

  auto accept = [&](int32_t id) { return parse_special || !is_special_type(v.types[id]); };
  size_t start = 0;
  if (!v.special.empty()) {
    for (size_t pos = 0; pos < text.size();) {
      auto [id, len] = v.special.match(text, pos, accept);
      if (id < 0) {
        ++pos;
        continue;
      }
      encode_fragment(text.substr(start, pos - start));
      out.push_back(id);
      after_special = true;
      pos += len;
      start = pos;
    }
  }
  encode_fragment(text.substr(start));

  if (add_special && v.add_eos) out.push_back(v.eos);
  return out;
}

std::string Tokenizer::token_to_piece(int32_t id, bool special) const {
  const Vocab& v = *vocab_;
  if (id < 0 || size_t(id) >= v.tokens.size()) return {};
  const std::string& text = v.tokens[id];
  const TokenType t = v.types[id];
  if (is_special_type(t)) return special ? text : std::string();
  if (v.type == VocabType::spm) {
    if (t == TokenType::byte) {
      // "<0xAB>" is byte 0xAB. Anything else typed as a byte token (a malformed vocabulary:
      // "<0xZZ>" made std::stoi throw and terminate strata) renders as its text.
      const int hi = hex_digit(text.size() == 6 ? text[3] : 0), lo = hex_digit(text.size() == 6 ? text[4] : 0);
      if (text.size() == 6 && text.compare(0, 3, "<0x") == 0 && text[5] == '>' && hi >= 0 && lo >= 0)
        return std::string(1, char(hi * 16 + lo));
      return text;
    }
    std::string s;
    s.reserve(text.size());
    for (size_t i = 0; i < text.size();) {
      if (text.compare(i, kSpmSpace.size(), kSpmSpace) == 0) {
        s += ' ';
        i += kSpmSpace.size();
      } else {
        s += text[i++];
      }
    }
    return s;
  }
  // Byte-level: each code point stands for one byte.
  std::string s;
  s.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const Utf8Char c = utf8_decode_at(text, i);
    const int b = unicode_to_byte(c.cp);
    if (b >= 0) s += char(b);
    else s.append(text, i, c.len);  // not in the byte alphabet: keep as is
    i += c.len;
  }
  return s;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool special) const {
  const Vocab& v = *vocab_;
  std::string out;
  bool after_special = true;
  for (int32_t id : ids) {
    std::string piece = token_to_piece(id, special);
    const bool is_token = id >= 0 && size_t(id) < v.tokens.size();
    if (is_token && (is_special_type(v.types[id]) || v.types[id] == TokenType::user_defined)) {
      after_special = true;
      out += piece;
      continue;
    }
    if (v.add_space_prefix && after_special && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
    after_special = false;
    out += piece;
  }
  return out;
}

int32_t Tokenizer::bos() const { return vocab_->bos; }
int32_t Tokenizer::eos() const { return vocab_->eos; }
bool Tokenizer::is_eog(int32_t id) const {
  return id >= 0 && size_t(id) < vocab_->eog.size() && vocab_->eog[id];
}
size_t Tokenizer::n_vocab() const { return vocab_->tokens.size(); }
bool Tokenizer::add_bos() const { return vocab_->add_bos; }
VocabType Tokenizer::type() const { return vocab_->type; }
const std::string& Tokenizer::token_text(int32_t id) const { return vocab_->tokens.at(size_t(id)); }
TokenType Tokenizer::token_type(int32_t id) const { return vocab_->types.at(size_t(id)); }
std::optional<int32_t> Tokenizer::find_token(std::string_view text) const {
  const int32_t id = vocab_->lookup(text);
  return id < 0 ? std::nullopt : std::optional<int32_t>(id);
}
const std::string& Tokenizer::chat_template() const { return vocab_->chat_template; }

}  // namespace strata::tokenizer
