// Fuzz target: the tokenizer, both families. The first input byte picks what is fuzzed:
//   0      text through a fixed SentencePiece vocabulary
//   1,2,3  text through a fixed byte-level BPE vocabulary (pre-tokenizer gpt-2, llama-bpe, qwen2)
//   4, 5   a vocabulary built from the input's lines (SPM, BPE; see fuzz_vocab.h), then text
//   6      the rest is a GGUF file: its vocabulary is loaded and a fixed text encoded
// The second byte seeds the special-id choices of modes 4/5. Encoding and decoding must never
// crash; byte-level BPE (without NFC) must decode back to exactly the text it encoded.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>
#include <vector>

#include "fuzz_vocab.h"
#include "model/gguf_file.h"
#include "tokenizer/tokenizer.h"

using namespace strata;

namespace {

// Tokenizers hold views into the File's bytes only while loading, so the File may go after.
std::optional<tokenizer::Tokenizer> load(const std::vector<uint8_t>& bytes) {
  auto file = gguf::File::parse(bytes, {.require_data = false});
  if (!file.is_ok()) return std::nullopt;
  auto tok = tokenizer::Tokenizer::from_gguf(*file);
  if (!tok.is_ok()) return std::nullopt;
  return std::move(tok).value();
}

const tokenizer::Tokenizer& fixed(int mode) {
  static const tokenizer::Tokenizer spm = *load(fuzz::spm_vocab_bytes());
  static const tokenizer::Tokenizer gpt2 = *load(fuzz::bpe_vocab_bytes("gpt-2"));
  static const tokenizer::Tokenizer llama3 = *load(fuzz::bpe_vocab_bytes("llama-bpe"));
  static const tokenizer::Tokenizer qwen2 = *load(fuzz::bpe_vocab_bytes("qwen2"));
  switch (mode) {
    case 0: return spm;
    case 1: return gpt2;
    case 2: return llama3;
    default: return qwen2;
  }
}

void exercise(const tokenizer::Tokenizer& tok, std::string_view text, bool check_roundtrip) {
  for (bool parse_special : {false, true}) {
    const std::vector<int32_t> ids = tok.encode(text, /*add_special=*/!parse_special, parse_special);
    for (int32_t id : ids)
      if (id < 0 || size_t(id) >= tok.n_vocab()) __builtin_trap();  // ids index the embedding
    const std::string back = tok.decode(ids);
    if (check_roundtrip && parse_special && back != text) __builtin_trap();
    for (int32_t id : ids) (void)tok.is_eog(id);
  }
  // Arbitrary ids (negative, past the end) decode to something, never crash.
  std::vector<int32_t> raw(text.size() / 4);
  if (!raw.empty()) std::memcpy(raw.data(), text.data(), raw.size() * 4);
  for (int32_t& id : raw) id %= int32_t(tok.n_vocab() + 8);
  (void)tok.decode(raw, false);
  (void)tok.decode(raw, true);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const int mode = data[0] % 7;
  const uint8_t ids = data[1];
  const std::string_view rest(reinterpret_cast<const char*>(data + 2), size - 2);
  if (mode <= 3) {
    exercise(fixed(mode), rest, mode == 1 || mode == 2);
    return 0;
  }
  if (mode == 6) {
    const std::vector<uint8_t> bytes(rest.begin(), rest.end());
    if (auto tok = load(bytes)) exercise(*tok, "Hello <|im_start|>world 123 caf\xC3\xA9\n\n", false);
    return 0;
  }
  // Modes 4, 5: the vocabulary spec ends at the first "\n\n\n"; the text follows it.
  size_t cut = rest.find("\n\n\n");
  const std::string_view spec = rest.substr(0, cut), text = cut == rest.npos ? "" : rest.substr(cut + 3);
  if (auto tok = load(fuzz::vocab_from_lines(spec, mode == 5, ids))) exercise(*tok, text, false);
  return 0;
}
