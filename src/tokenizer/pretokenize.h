// Pre-tokenizers of byte-level BPE vocabularies: split text into words before BPE merges, as the
// models' regexes do. Each is a hand-written matcher equivalent to one regex (alternatives tried
// in order, greedy, with the backtracking the regex implies), linear in the input length.
//
//   gpt2:   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   llama3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//           ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//   qwen2:  as llama3 with \p{N} (single digits) instead of \p{N}{1,3}
#pragma once

#include <optional>
#include <string_view>
#include <vector>

namespace strata::tokenizer {

enum class PreType { gpt2, llama3, qwen2 };

// From GGUF `tokenizer.ggml.pre` ("gpt-2", "llama-bpe", "qwen2", ...); nullopt when unknown.
std::optional<PreType> pre_type_from_name(std::string_view name);
std::string_view pre_type_name(PreType t);

// Splits text into consecutive words covering all of it (views into `text`).
std::vector<std::string_view> pretokenize(PreType type, std::string_view text);

}  // namespace strata::tokenizer
