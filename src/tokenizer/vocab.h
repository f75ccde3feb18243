// The vocabulary as the encoders use it (internal to the tokenizer module).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/pretokenize.h"
#include "tokenizer/tokenizer.h"

namespace strata::tokenizer {

// A byte trie over the tokens that may be matched verbatim in raw text (control, unknown and
// user-defined tokens), for leftmost-longest partitioning.
class SpecialTrie {
 public:
  void insert(std::string_view text, int32_t id);
  // Longest token starting at text[pos] that `accept(id)` allows; {-1, 0} when none.
  template <typename Accept>
  std::pair<int32_t, size_t> match(std::string_view text, size_t pos, Accept accept) const {
    int32_t best = -1;
    size_t best_len = 0;
    uint32_t node = 0;
    for (size_t i = pos; i < text.size(); ++i) {
      auto it = edges_.find(key(node, uint8_t(text[i])));
      if (it == edges_.end()) break;
      node = it->second;
      const int32_t id = token_[node];
      if (id >= 0 && accept(id)) {
        best = id;
        best_len = i + 1 - pos;
      }
    }
    return {best, best_len};
  }
  bool empty() const { return token_.size() <= 1; }

 private:
  static uint64_t key(uint32_t node, uint8_t b) { return (uint64_t(node) << 8) | b; }
  std::vector<int32_t> token_{-1};  // per node: the token ending here, or -1
  std::unordered_map<uint64_t, uint32_t> edges_;
};

struct MergeResult {
  int32_t rank;
  int32_t id;
};

struct Vocab {
  VocabType type = VocabType::spm;
  std::vector<std::string> tokens;
  std::vector<float> scores;        // SPM merge priority (higher first); zeros for BPE
  std::vector<TokenType> types;
  std::unordered_map<std::string_view, int32_t> token_to_id;  // views into `tokens`

  int32_t bos = -1, eos = -1, unk = -1, eot = -1, eom = -1;
  bool add_bos = false, add_eos = false;
  bool add_space_prefix = false;  // SPM: prepend " " to text after the start / a control token
  std::vector<uint8_t> eog;       // per token: 1 when it ends generation
  std::string chat_template;

  // SPM: <0xXX> token per byte (-1 when missing).
  std::array<int32_t, 256> byte_token{};
  // BPE
  PreType pre = PreType::gpt2;
  bool ignore_merges = false;  // llama 3: a word that is itself a token skips the merges
  bool nfc = false;            // qwen2/3: text is NFC-normalized first (their HF normalizer)
  std::unordered_map<uint64_t, MergeResult> merges;  // (left id << 32 | right id) -> result
  SpecialTrie special;

  int32_t lookup(std::string_view text) const {
    auto it = token_to_id.find(text);
    return it == token_to_id.end() ? -1 : it->second;
  }
  static uint64_t pair_key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }
};

Result<std::shared_ptr<const Vocab>> load_vocab(const gguf::File& file);

// Encoders of one raw-text fragment (no special tokens inside), appending to `out`.
// spm_encode expects text with spaces already escaped to U+2581.
void spm_encode(const Vocab& v, std::string_view text, std::vector<int32_t>& out);
void bpe_encode(const Vocab& v, std::string_view text, std::vector<int32_t>& out);

}  // namespace strata::tokenizer
