// Reads `tokenizer.ggml.*` metadata into a Vocab, validating everything the encoders rely on.
#include <fmt/format.h>

#include "core/log.h"
#include "model/model_spec.h"
#include "tokenizer/vocab.h"

namespace strata::tokenizer {
namespace {

constexpr const char* kModel = "tokenizer.ggml.model";
constexpr const char* kTokens = "tokenizer.ggml.tokens";
constexpr const char* kScores = "tokenizer.ggml.scores";
constexpr const char* kTypes = "tokenizer.ggml.token_type";
constexpr const char* kMerges = "tokenizer.ggml.merges";
constexpr const char* kPre = "tokenizer.ggml.pre";

// Token texts that end a turn in the chat formats strata knows, beyond eos/eot.
constexpr std::string_view kEndOfTurnTexts[] = {
    "<|eot_id|>", "<|eom_id|>", "<|im_end|>", "<end_of_turn>", "<|end|>", "<|endoftext|>",
    "<|end_of_text|>", "<eos>",
};

template <typename T>
const T* get_if_item(const gguf::Value& v) {
  return std::get_if<T>(&v.data);
}

// Optional token id key: absent -> fallback; present -> must be a valid id (or -1 to mean none).
Result<int32_t> token_id(const gguf::File& f, const std::string& key, int32_t fallback,
                         size_t n_vocab) {
  if (!f.has(key)) return fallback;
  auto v = f.get_int(key);
  if (!v) return v.status();
  if (*v == -1 || *v == 0xFFFFFFFFll) return -1;  // some converters write -1 / UINT32_MAX for "none"
  if (*v < 0 || uint64_t(*v) >= n_vocab)
    return Status::error("{}: token id {} out of range (n_vocab {})", key, *v, n_vocab);
  return int32_t(*v);
}

Status load_tokens(const gguf::File& f, Vocab& v) {
  auto arr = f.get_array(kTokens);
  if (!arr) return Status::error("{}: missing or not an array (not a tokenizer vocabulary?)", kTokens);
  const gguf::Array& a = **arr;
  if (a.elem_type != gguf::ValueType::string) return Status::error("{}: not an array of strings", kTokens);
  if (a.items.empty()) return Status::error("{}: empty", kTokens);
  if (a.items.size() > model::kMaxVocab)
    return Status::error("{}: {} tokens is beyond strata's limit of {}", kTokens, a.items.size(), model::kMaxVocab);
  v.tokens.reserve(a.items.size());
  for (const auto& item : a.items) {
    const auto* s = get_if_item<std::string>(item);
    if (!s) return Status::error("{}[{}]: not a string", kTokens, v.tokens.size());
    v.tokens.push_back(*s);
  }
  const size_t n = v.tokens.size();

  v.scores.assign(n, 0.0f);
  if (f.has(kScores)) {
    auto sa = f.get_array(kScores);
    if (!sa) return sa.status();
    if ((*sa)->items.size() != n)
      return Status::error("{}: {} scores for {} tokens", kScores, (*sa)->items.size(), n);
    for (size_t i = 0; i < n; ++i) {
      const auto* d = get_if_item<double>((*sa)->items[i]);
      if (!d) return Status::error("{}[{}]: not a float", kScores, i);
      v.scores[i] = float(*d);
    }
  } else if (v.type == VocabType::spm) {
    return Status::error("{}: missing (required by tokenizer model 'llama')", kScores);
  }

  v.types.assign(n, TokenType::normal);
  if (f.has(kTypes)) {
    auto ta = f.get_array(kTypes);
    if (!ta) return ta.status();
    if ((*ta)->items.size() != n)
      return Status::error("{}: {} types for {} tokens", kTypes, (*ta)->items.size(), n);
    for (size_t i = 0; i < n; ++i) {
      const auto& item = (*ta)->items[i];
      int64_t t;
      if (const auto* s = get_if_item<int64_t>(item)) t = *s;
      else if (const auto* u = get_if_item<uint64_t>(item)) t = int64_t(*u);
      else return Status::error("{}[{}]: not an integer", kTypes, i);
      if (t < 0 || t > 6) return Status::error("{}[{}]: unknown token type {}", kTypes, i, t);
      v.types[i] = TokenType(t);
    }
  }

  v.token_to_id.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    // On duplicate texts the first id wins (as the reference implementations do).
    v.token_to_id.emplace(std::string_view(v.tokens[i]), int32_t(i));
  }
  return Status::ok();
}

Status load_merges(const gguf::File& f, Vocab& v) {
  auto arr = f.get_array(kMerges);
  if (!arr) return Status::error("{}: missing or not an array (required by tokenizer model 'gpt2')", kMerges);
  const auto& items = (*arr)->items;
  v.merges.reserve(items.size());
  for (size_t r = 0; r < items.size(); ++r) {
    const auto* s = get_if_item<std::string>(items[r]);
    if (!s) return Status::error("{}[{}]: not a string", kMerges, r);
    // "left right": byte-level token text never holds a plain space, so the first space splits.
    const size_t sp = s->find(' ', 1);
    if (sp == std::string::npos) return Status::error("{}[{}]: '{}' is not 'left right'", kMerges, r, *s);
    const std::string_view left(s->data(), sp), right(s->data() + sp + 1, s->size() - sp - 1);
    const int32_t a = v.lookup(left), b = v.lookup(right);
    if (a < 0 || b < 0)
      return Status::error("{}[{}]: '{}' references a token not in the vocabulary", kMerges, r, *s);
    const int32_t c = v.lookup(std::string(left) + std::string(right));
    if (c < 0) return Status::error("{}[{}]: result of '{}' is not in the vocabulary", kMerges, r, *s);
    v.merges.emplace(Vocab::pair_key(a, b), MergeResult{int32_t(r), c});  // first rank wins
  }
  return Status::ok();
}

}  // namespace

void SpecialTrie::insert(std::string_view text, int32_t id) {
  uint32_t node = 0;
  for (char ch : text) {
    auto [it, added] = edges_.emplace(key(node, uint8_t(ch)), uint32_t(token_.size()));
    if (added) token_.push_back(-1);
    node = it->second;
  }
  if (token_[node] < 0) token_[node] = id;
}

Result<std::shared_ptr<const Vocab>> load_vocab(const gguf::File& f) {
  auto vocab = std::make_shared<Vocab>();
  Vocab& v = *vocab;

  auto model = f.get_string(kModel);
  if (!model) return Status::error("{}: missing (not a tokenizer vocabulary?)", kModel);
  if (*model == "llama") v.type = VocabType::spm;
  else if (*model == "gpt2") v.type = VocabType::bpe;
  else return Status::error("{}: unsupported tokenizer model '{}' (supported: llama, gpt2)", kModel, *model);

  STRATA_TRY(load_tokens(f, v));
  const size_t n = v.tokens.size();

  if (v.type == VocabType::bpe) {
    auto pre = f.get_string(kPre, "gpt-2");
    if (!pre) return pre.status();
    if (auto p = pre_type_from_name(*pre)) {
      v.pre = *p;
    } else {
      log::warn("{}: unknown pre-tokenizer '{}', using gpt-2's", kPre, *pre);
      v.pre = PreType::gpt2;
    }
    v.ignore_merges = v.pre == PreType::llama3;
    // qwen2's tokenizer.json normalizes to NFC before pre-tokenizing; GGUF has no key for it, so
    // it follows from the pre-tokenizer (as llama 3's ignore_merges does).
    v.nfc = v.pre == PreType::qwen2;
    STRATA_TRY(load_merges(f, v));
  } else {
    v.byte_token.fill(-1);
    for (int b = 0; b < 256; ++b) v.byte_token[b] = v.lookup(fmt::format("<0x{:02X}>", b));
  }

  // Special ids. SPM defaults follow SentencePiece's numbering (unk 0, bos 1, eos 2).
  const bool spm = v.type == VocabType::spm;
  auto bos = token_id(f, "tokenizer.ggml.bos_token_id", spm ? 1 : -1, n);
  if (!bos) return bos.status();
  auto eos = token_id(f, "tokenizer.ggml.eos_token_id", spm ? 2 : -1, n);
  if (!eos) return eos.status();
  auto unk = token_id(f, "tokenizer.ggml.unknown_token_id", spm ? 0 : -1, n);
  if (!unk) return unk.status();
  auto eot = token_id(f, "tokenizer.ggml.eot_token_id", -1, n);
  if (!eot) return eot.status();
  auto eom = token_id(f, "tokenizer.ggml.eom_token_id", -1, n);
  if (!eom) return eom.status();
  v.bos = *bos;
  v.eos = *eos;
  v.unk = *unk;
  v.eot = *eot;
  v.eom = *eom;
  if (spm && size_t(v.unk) >= n) v.unk = -1;

  auto add_bos = f.get_bool("tokenizer.ggml.add_bos_token", spm);
  if (!add_bos) return add_bos.status();
  auto add_eos = f.get_bool("tokenizer.ggml.add_eos_token", false);
  if (!add_eos) return add_eos.status();
  auto add_space = f.get_bool("tokenizer.ggml.add_space_prefix", spm);
  if (!add_space) return add_space.status();
  v.add_bos = *add_bos && v.bos >= 0;
  v.add_eos = *add_eos && v.eos >= 0;
  v.add_space_prefix = spm && *add_space;

  auto tmpl = f.get_string("tokenizer.chat_template", "");
  if (!tmpl) return tmpl.status();
  v.chat_template = *tmpl;

  v.eog.assign(n, 0);
  for (int32_t id : {v.eos, v.eot, v.eom})
    if (id >= 0) v.eog[id] = 1;
  for (auto text : kEndOfTurnTexts) {
    const int32_t id = v.lookup(text);
    if (id >= 0 && v.types[id] == TokenType::control) v.eog[id] = 1;
  }

  for (size_t i = 0; i < n; ++i) {
    const TokenType t = v.types[i];
    if ((t == TokenType::control || t == TokenType::user_defined || t == TokenType::unknown) &&
        !v.tokens[i].empty())
      v.special.insert(v.tokens[i], int32_t(i));
  }
  return std::shared_ptr<const Vocab>(std::move(vocab));
}

}  // namespace strata::tokenizer
