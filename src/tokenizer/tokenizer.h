// Text <-> token ids, from the vocabulary in a GGUF file's metadata (`tokenizer.ggml.*`).
//
// Two algorithm families, chosen by `tokenizer.ggml.model`:
//   "llama" — SentencePiece-style (gemma, llama 2, phi-3): spaces become U+2581, pieces merge
//             greedily by score, characters not in the vocabulary fall back to <0xXX> byte tokens.
//   "gpt2"  — byte-level BPE (gpt-2, llama 3, qwen2/3; qwen2 text is NFC-normalized first): a
//             pre-tokenizer regex (`tokenizer.ggml.pre`)
//             splits words, bytes map to printable code points, merges apply by rank.
// Special tokens: user-defined tokens (GGUF token type 4) are always matched in the raw text;
// control and unknown tokens (types 3, 2: <bos>, <|im_start|>, <end_of_turn>) only when the caller
// asks for parse_special — so untrusted text cannot inject chat-control tokens.
//
// Thread-safety: immutable after from_gguf(); encode/decode may run concurrently. Copies are
// cheap (the vocabulary is shared).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "model/gguf_file.h"

namespace strata::tokenizer {

enum class VocabType { spm, bpe };

// GGUF `tokenizer.ggml.token_type` values (llama.cpp's numbering).
enum class TokenType : int32_t {
  undefined = 0, normal = 1, unknown = 2, control = 3, user_defined = 4, unused = 5, byte = 6,
};

struct Vocab;  // tokenizer/vocab.h (internal)

class Tokenizer {
 public:
  // Reads and validates the vocabulary; errors name the offending key. Works on vocabulary-only
  // GGUFs (no tensors).
  static Result<Tokenizer> from_gguf(const gguf::File& file);

  // add_special: prepend BOS (and append EOS) as the vocabulary's add_bos/add_eos flags say.
  // parse_special: match control tokens written in the text ("<start_of_turn>") as single tokens.
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;

  // The text one token stands for (bytes, for byte tokens). Control/unknown tokens render as
  // their text when `special`, else as "".
  std::string token_to_piece(int32_t id, bool special = true) const;
  // Concatenated pieces; an SPM vocabulary with add_space_prefix drops the space that encode()
  // prepended to the first text after the start or a control token, so decode(encode(s)) == s.
  std::string decode(std::span<const int32_t> ids, bool special = true) const;

  int32_t bos() const;  // -1 when the vocabulary has none
  int32_t eos() const;
  bool is_eog(int32_t id) const;  // end of generation: eos, eot, and known end-of-turn controls
  size_t n_vocab() const;
  bool add_bos() const;

  VocabType type() const;
  const std::string& token_text(int32_t id) const;  // as stored (U+2581 / byte-level form)
  TokenType token_type(int32_t id) const;
  std::optional<int32_t> find_token(std::string_view text) const;
  const std::string& chat_template() const;  // `tokenizer.chat_template`, "" when absent

 private:
  std::shared_ptr<const Vocab> vocab_;
};

}  // namespace strata::tokenizer
