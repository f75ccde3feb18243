// SentencePiece model files (tokenizer.model: a serialised sentencepiece ModelProto) -> GGUF
// vocabulary metadata (`tokenizer.ggml.*`, model "llama"), as llama.cpp's converter stores them:
// pieces, scores and piece types (the GGUF token types use SentencePiece's numbering), BOS / EOS /
// UNK / PAD ids from the trainer spec, add_space_prefix from the normaliser's add_dummy_prefix.
//
// strata's SPM encoder merges by piece score, which is SentencePiece's own algorithm for BPE
// models; for unigram models (Viterbi) it is an approximation, and convert says so.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/gguf_writer.h"

namespace strata::tokenizer {

struct SpmModel {
  std::vector<std::string> pieces;
  std::vector<float> scores;
  std::vector<int32_t> types;  // 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte
  int32_t model_type = 1;      // 1 unigram, 2 bpe, 3 word, 4 char
  int32_t unk_id = 0, bos_id = 1, eos_id = 2, pad_id = -1;
  bool byte_fallback = false;
  bool add_dummy_prefix = true;
  bool remove_extra_whitespaces = true;
  std::string normalizer = "nmt_nfkc";
};

// Parses the protobuf; errors name the byte offset of what is malformed.
Result<SpmModel> parse_spm_model(const std::string& path);

// Sets the vocabulary keys on `out`. Errors: ids out of range, an unsupported model type.
Status set_spm_vocab(const SpmModel& m, gguf::Writer& out);

}  // namespace strata::tokenizer
