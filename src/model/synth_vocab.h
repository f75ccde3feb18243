// A generated SentencePiece-style ("llama" tokenizer model) vocabulary for synthetic models:
// control tokens (<pad> 0, <eos> 1, <bos> 2, <unk> 3, as gemma numbers them), the 256 byte
// tokens <0x00>..<0xFF> for byte fallback, then pieces: single printable characters, and
// "▁"-prefixed and bare lowercase letter strings in order of length, with scores decreasing so
// that longer merges are preferred in the order generated.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace strata::model {

inline constexpr uint32_t kSynthMinVocab = 4 + 256 + 96;

struct SynthVocab {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> token_types;  // 1 normal, 2 unknown, 3 control, 6 byte (GGUF token types)
  uint32_t pad_id = 0, eos_id = 1, bos_id = 2, unk_id = 3;
};

// n_vocab >= kSynthMinVocab (validated by the caller).
SynthVocab make_synth_vocab(uint32_t n_vocab);

}  // namespace strata::model
