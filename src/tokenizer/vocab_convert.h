// Hugging Face tokenizer.json (+ tokenizer_config.json) -> GGUF vocabulary metadata
// (`tokenizer.ggml.*`), for vocabulary-only GGUFs that `strata tokenize` and the tests load.
//
// A BPE model with byte_fallback (gemma) becomes an SPM ("llama") vocabulary, as real gemma GGUFs
// store it: scores come from merge ranks (the piece made by merge r scores -r, so earlier merges
// win), <0xXX> pieces are byte tokens. A byte-level BPE model (qwen2/3, llama 3, gpt-2) becomes a
// "gpt2" vocabulary with its merges and the pre-tokenizer recognised from its regex.
// Added tokens become control tokens (special) or user-defined tokens (not special).
#pragma once

#include <optional>
#include <string>

#include "core/status.h"
#include "model/gguf_writer.h"
#include "tokenizer/tokenizer.h"

namespace strata::tokenizer {

struct ConvertOptions {
  std::optional<VocabType> as;  // default: spm when the model uses byte fallback, else bpe
  // tokenizer_config.json (bos/eos, add_bos_token, chat_template); "" = the file of that name
  // beside tokenizer.json, when present.
  std::string config_path;
  std::string name;  // general.name; default: the folder name of tokenizer.json (above "models/")
};

struct ConvertSummary {
  VocabType type = VocabType::bpe;
  size_t n_tokens = 0;
  size_t n_merges = 0;
  std::string pre;  // BPE pre-tokenizer name
};

// Sets the vocabulary keys on `out` (the caller writes the file, e.g. write_header_only()).
Result<ConvertSummary> convert_tokenizer_json(const std::string& json_path,
                                              const ConvertOptions& options, gguf::Writer& out);

}  // namespace strata::tokenizer
