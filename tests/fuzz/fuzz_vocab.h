// Small vocabularies for the tokenizer fuzz target and its seeds, as GGUF metadata bytes: a
// SentencePiece-style one (the synthetic models' vocab plus chat control tokens) and byte-level
// BPE ones (the 256-byte alphabet plus merges learned left to right from a few words), and a
// builder that turns the fuzz input's lines into a vocabulary of either family.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "model/gguf_writer.h"
#include "model/synth_vocab.h"
#include "tokenizer/unicode.h"

namespace strata::fuzz {

// Control tokens (type 3) are matched in raw text only with parse_special; user-defined ones
// (type 4) always.
inline const char* kControl[] = {"<start_of_turn>", "<end_of_turn>", "<|im_start|>", "<|im_end|>", "<|endoftext|>"};
inline const char* kUserDefined[] = {"<tool_call>", "[INST]"};

inline std::vector<uint8_t> spm_vocab_bytes() {
  model::SynthVocab v = model::make_synth_vocab(model::kSynthMinVocab + 200);
  for (const char* c : kControl) {
    v.tokens.push_back(c);
    v.scores.push_back(0);
    v.token_types.push_back(3);
  }
  for (const char* u : kUserDefined) {
    v.tokens.push_back(u);
    v.scores.push_back(0);
    v.token_types.push_back(4);
  }
  gguf::Writer w;
  w.set("tokenizer.ggml.model", gguf::Value::string("llama"));
  w.set("tokenizer.ggml.tokens", gguf::Value::string_array(v.tokens));
  w.set("tokenizer.ggml.scores", gguf::Value::f32_array(v.scores));
  w.set("tokenizer.ggml.token_type", gguf::Value::i32_array(v.token_types));
  w.set("tokenizer.ggml.bos_token_id", gguf::Value::u32(v.bos_id));
  w.set("tokenizer.ggml.eos_token_id", gguf::Value::u32(v.eos_id));
  w.set("tokenizer.ggml.unknown_token_id", gguf::Value::u32(v.unk_id));
  return w.header_bytes();
}

// Byte-level BPE: one token per byte, then for each word its prefixes as tokens, each made by
// the merge "prefix last-char".
inline std::vector<uint8_t> bpe_vocab_bytes(const char* pre) {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  std::set<std::string> have;
  std::vector<std::string> merges;
  auto add = [&](const std::string& t, int32_t type) {
    if (have.insert(t).second) {
      tokens.push_back(t);
      types.push_back(type);
    }
  };
  for (int b = 0; b < 256; ++b) add(tokenizer::bytes_to_byte_level(std::string(1, char(b))), 1);
  for (const char* word : {" the", "the", " and", "ing", " hello", " world", "er", "123", "12", " \n", "\n\n",
                           "'s", " caf\xC3\xA9", "\xE4\xB8\xAD\xE6\x96\x87", "  "}) {
    const std::string bl = tokenizer::bytes_to_byte_level(word);
    // Split the byte-level text at code-point boundaries.
    std::vector<std::string> cps;
    for (size_t i = 0; i < bl.size();) {
      const size_t n = tokenizer::utf8_len_at(bl, i);
      cps.push_back(bl.substr(i, n));
      i += n;
    }
    std::string prefix = cps.empty() ? "" : cps[0];
    for (size_t i = 1; i < cps.size(); ++i) {
      const std::string next = prefix + cps[i];
      if (!have.count(next)) merges.push_back(prefix + " " + cps[i]);
      add(next, 1);
      prefix = next;
    }
  }
  for (const char* c : kControl) add(c, 3);
  for (const char* u : kUserDefined) add(u, 4);
  gguf::Writer w;
  w.set("tokenizer.ggml.model", gguf::Value::string("gpt2"));
  w.set("tokenizer.ggml.pre", gguf::Value::string(pre));
  w.set("tokenizer.ggml.tokens", gguf::Value::string_array(tokens));
  w.set("tokenizer.ggml.token_type", gguf::Value::i32_array(types));
  w.set("tokenizer.ggml.merges", gguf::Value::string_array(merges));
  w.set("tokenizer.ggml.eos_token_id", gguf::Value::u32(uint32_t(tokens.size() - 3)));  // <|endoftext|>
  return w.header_bytes();
}

// A vocabulary from fuzz input: `spec` holds lines; before the first empty line, tokens (a first
// byte 0x00..0x06 is the token's type, then its text), after it merges ("left right"). Scores
// fall with the line number. bos/eos/unk come from `ids` (bytes of the selector).
inline std::vector<uint8_t> vocab_from_lines(std::string_view spec, bool bpe, uint8_t ids) {
  std::vector<std::string> tokens, merges;
  std::vector<float> scores;
  std::vector<int32_t> types;
  bool in_merges = false;
  for (size_t pos = 0; pos <= spec.size();) {
    size_t end = spec.find('\n', pos);
    if (end == std::string_view::npos) end = spec.size();
    std::string_view line = spec.substr(pos, end - pos);
    pos = end + 1;
    if (line.empty()) {
      if (in_merges) break;
      in_merges = true;
      continue;
    }
    if (in_merges) {
      merges.emplace_back(line);
      continue;
    }
    int32_t type = 1;
    if (uint8_t(line[0]) <= 6) {
      type = line[0];
      line.remove_prefix(1);
    }
    tokens.emplace_back(line);
    types.push_back(type);
    scores.push_back(-float(tokens.size()));
  }
  gguf::Writer w;
  w.set("tokenizer.ggml.model", gguf::Value::string(bpe ? "gpt2" : "llama"));
  w.set("tokenizer.ggml.tokens", gguf::Value::string_array(tokens));
  w.set("tokenizer.ggml.scores", gguf::Value::f32_array(scores));
  w.set("tokenizer.ggml.token_type", gguf::Value::i32_array(types));
  if (bpe) {
    w.set("tokenizer.ggml.merges", gguf::Value::string_array(merges));
    w.set("tokenizer.ggml.pre", gguf::Value::string(ids & 1 ? "llama-bpe" : ids & 2 ? "qwen2" : "gpt-2"));
  }
  const uint32_t n = uint32_t(tokens.size());
  if (n) {
    w.set("tokenizer.ggml.bos_token_id", gguf::Value::u32((ids >> 2) % n));
    w.set("tokenizer.ggml.eos_token_id", gguf::Value::u32((ids >> 4) % n));
    w.set("tokenizer.ggml.unknown_token_id", gguf::Value::u32((ids >> 6) % n));
  }
  w.set("tokenizer.ggml.add_eos_token", gguf::Value::boolean(ids & 8));
  return w.header_bytes();
}

}  // namespace strata::fuzz
