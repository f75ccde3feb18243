// SentencePiece-style encoding ("llama" tokenizer model).
//
// Start from one symbol per UTF-8 character; repeatedly merge the adjacent pair whose
// concatenation is a vocabulary piece with the highest score (ties: leftmost first), until no pair
// forms a piece. A priority queue of candidate pairs keeps this O(n log n): pairs made stale by an
// earlier merge are recognised (their combined length changed) and skipped when popped. Final
// symbols that are not pieces fall back to <0xXX> byte tokens, else <unk>.
#include <queue>

#include "tokenizer/unicode.h"
#include "tokenizer/vocab.h"

namespace strata::tokenizer {
namespace {

struct Symbol {
  int32_t prev, next;
  uint32_t offset, len;  // bytes of the text; len 0 once merged into its left neighbour
};

struct Bigram {
  int32_t left, right;
  float score;
  uint32_t len;  // combined length when queued: stale if the symbols changed since
};

struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

// Pieces that merges may produce: text pieces, not control/unknown/byte/unused entries.
bool mergeable(TokenType t) {
  return t == TokenType::normal || t == TokenType::user_defined || t == TokenType::undefined;
}

}  // namespace

void spm_encode(const Vocab& v, std::string_view text, std::vector<int32_t>& out) {
  if (text.empty()) return;
  std::vector<Symbol> sym;
  sym.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto n = uint32_t(std::min(utf8_len_at(text, i), text.size() - i));
    sym.push_back({int32_t(sym.size()) - 1, int32_t(sym.size()) + 1, uint32_t(i), n});
    i += n;
  }
  sym.back().next = -1;

  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
  auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const uint32_t len = sym[left].len + sym[right].len;
    const int32_t id = v.lookup(text.substr(sym[left].offset, len));
    if (id < 0 || !mergeable(v.types[id])) return;
    queue.push({left, right, v.scores[id], len});
  };
  for (int32_t i = 1; i < int32_t(sym.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol& l = sym[b.left];
    Symbol& r = sym[b.right];
    if (l.len == 0 || r.len == 0 || l.len + r.len != b.len) continue;  // stale
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }

  for (int32_t i = 0; i >= 0; i = sym[i].next) {
    const std::string_view piece = text.substr(sym[i].offset, sym[i].len);
    const int32_t id = v.lookup(piece);
    if (id >= 0 && mergeable(v.types[id])) {
      out.push_back(id);
      continue;
    }
    for (char c : piece) {
      const int32_t bt = v.byte_token[uint8_t(c)];
      if (bt >= 0) out.push_back(bt);
      else if (v.unk >= 0) out.push_back(v.unk);
    }
  }
}

}  // namespace strata::tokenizer
