// Byte-level BPE encoding ("gpt2" tokenizer model: gpt-2, llama 3, qwen2/3).
//
// The pre-tokenizer splits the text into words; each word's bytes map to GPT-2's printable
// alphabet; then, within the word, the adjacent pair with the lowest merge rank is merged until no
// listed merge applies. A priority queue of candidate pairs keeps a long word (a run of 100 KB of
// CJK letters or punctuation is one word) O(n log n). A pair is stale when either side was merged
// since it was queued; stale pairs are skipped when popped.
#include <queue>

#include "tokenizer/unicode.h"
#include "tokenizer/vocab.h"

namespace strata::tokenizer {
namespace {

struct Symbol {
  int32_t prev, next;
  int32_t id;  // token id; -1 for a character outside the vocabulary
  bool alive;
};

struct Pair {
  int32_t left, right;
  int32_t rank;
  int32_t left_id, right_id;  // ids when queued
};

struct PairOrder {
  bool operator()(const Pair& a, const Pair& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

void bpe_word(const Vocab& v, std::string_view word, std::vector<int32_t>& out) {
  const std::string text = bytes_to_byte_level(word);
  if (v.ignore_merges) {
    const int32_t id = v.lookup(text);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  std::vector<Symbol> sym;
  sym.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t n = utf8_len_at(text, i);
    sym.push_back({int32_t(sym.size()) - 1, int32_t(sym.size()) + 1,
                   v.lookup(std::string_view(text).substr(i, n)), true});
    i += n;
  }
  if (sym.empty()) return;
  sym.back().next = -1;

  std::priority_queue<Pair, std::vector<Pair>, PairOrder> queue;
  auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const int32_t a = sym[left].id, b = sym[right].id;
    if (a < 0 || b < 0) return;
    auto it = v.merges.find(Vocab::pair_key(a, b));
    if (it == v.merges.end()) return;
    queue.push({left, right, it->second.rank, a, b});
  };
  for (int32_t i = 1; i < int32_t(sym.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    const Pair p = queue.top();
    queue.pop();
    Symbol& l = sym[p.left];
    Symbol& r = sym[p.right];
    if (!l.alive || !r.alive || l.next != p.right || l.id != p.left_id || r.id != p.right_id)
      continue;  // stale
    l.id = v.merges.at(Vocab::pair_key(p.left_id, p.right_id)).id;
    r.alive = false;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = p.left;
    try_add(l.prev, p.left);
    try_add(p.left, l.next);
  }

  for (int32_t i = 0; i >= 0; i = sym[i].next) {
    if (sym[i].id >= 0) out.push_back(sym[i].id);
    else if (v.unk >= 0) out.push_back(v.unk);  // a byte-level vocabulary covers all 256 bytes
  }
}

}  // namespace

void bpe_encode(const Vocab& v, std::string_view text, std::vector<int32_t>& out) {
  for (std::string_view word : pretokenize(v.pre, text)) bpe_word(v, word, out);
}

}  // namespace strata::tokenizer
