// Writes the binary seeds of tests/fuzz/corpus (run from the repository root after building the
// fuzz project: build-fuzz/make_fuzz_seeds). Text seeds (jobs, profiles, tokenizer texts) are
// committed as written by hand.
//   gguf/      a tiny complete llama model (F32, n_embd 8, 1 layer, 8 tokens), a header-only
//              gemma3 one and a vocabulary-only file
//   tokenizer/ mode-6 inputs (a selector byte pair, then a vocabulary-only GGUF)
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "fuzz_vocab.h"
#include "model/gguf_file.h"
#include "model/gguf_writer.h"
#include "model/model_spec.h"
#include "model/model_weights.h"

using namespace strata;

namespace {

void save(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  // Say how far each GGUF seed gets, so a seed that stops at the reader is noticed.
  std::string verdict = "-";
  if (auto f = gguf::File::parse(bytes, {.require_data = false}); !f.is_ok()) {
    verdict = "reader: " + f.message();
  } else if (auto spec = model::spec_from_gguf(*f); !spec.is_ok()) {
    verdict = "spec: " + spec.message();
  } else if (auto w = model::load_weights(*f, *spec); !w.is_ok()) {
    verdict = "weights: " + w.message();
  } else {
    verdict = "loads";
  }
  std::printf("%s: %zu bytes (%s)\n", path.c_str(), bytes.size(), verdict.c_str());
}

// The header plus zero-filled data for every tensor: a complete file the loader accepts.
std::vector<uint8_t> with_data(const gguf::Writer& w) {
  std::vector<uint8_t> b = w.header_bytes();
  b.resize(w.total_bytes(), 0);
  return b;
}

void tiny_model(gguf::Writer& w, const char* arch, uint32_t n_embd, uint32_t n_layer, uint32_t n_vocab) {
  const std::string a = arch;
  w.set("general.architecture", gguf::Value::string(a));
  w.set(a + ".embedding_length", gguf::Value::u32(n_embd));
  w.set(a + ".block_count", gguf::Value::u32(n_layer));
  w.set(a + ".feed_forward_length", gguf::Value::u32(n_embd));
  w.set(a + ".attention.head_count", gguf::Value::u32(2));
  w.set(a + ".attention.head_count_kv", gguf::Value::u32(1));
  w.set(a + ".context_length", gguf::Value::u32(64));
  w.set(a + ".attention.layer_norm_rms_epsilon", gguf::Value::f32(1e-6f));
  w.set(a + ".rope.freq_base", gguf::Value::f32(10000.0f));
  if (a == "gemma3") w.set(a + ".attention.sliding_window", gguf::Value::u32(16));
  std::vector<std::string> tokens;
  for (uint32_t i = 0; i < n_vocab; ++i) tokens.push_back(i < 3 ? std::string("<s") + char('0' + i) + ">" : std::string(1, char('a' + i)));
  w.set("tokenizer.ggml.model", gguf::Value::string("gpt2"));
  w.set("tokenizer.ggml.tokens", gguf::Value::string_array(tokens));
  w.set("tokenizer.ggml.merges", gguf::Value::string_array({}));
  const uint64_t e = n_embd, hd = n_embd / 2;
  w.add_tensor("token_embd.weight", GgmlType::F32, {e, n_vocab});
  w.add_tensor("output_norm.weight", GgmlType::F32, {e});
  for (uint32_t il = 0; il < n_layer; ++il) {
    auto n = [&](const char* role) { return "blk." + std::to_string(il) + "." + role + ".weight"; };
    w.add_tensor(n("attn_norm"), GgmlType::F32, {e});
    w.add_tensor(n("attn_q"), GgmlType::F32, {e, 2 * hd});
    w.add_tensor(n("attn_k"), GgmlType::F32, {e, hd});
    w.add_tensor(n("attn_v"), GgmlType::F32, {e, hd});
    w.add_tensor(n("attn_output"), GgmlType::F32, {2 * hd, e});
    if (a != "llama") {
      w.add_tensor(n("attn_q_norm"), GgmlType::F32, {hd});
      w.add_tensor(n("attn_k_norm"), GgmlType::F32, {hd});
    }
    if (a == "gemma3") {
      w.add_tensor(n("post_attention_norm"), GgmlType::F32, {e});
      w.add_tensor(n("post_ffw_norm"), GgmlType::F32, {e});
    }
    w.add_tensor(n("ffn_norm"), GgmlType::F32, {e});
    w.add_tensor(n("ffn_gate"), GgmlType::F32, {e, e});
    w.add_tensor(n("ffn_up"), GgmlType::F32, {e, e});
    w.add_tensor(n("ffn_down"), GgmlType::F32, {e, e});
  }
}

std::vector<uint8_t> prefixed(uint8_t mode, uint8_t ids, const std::vector<uint8_t>& body) {
  std::vector<uint8_t> b{mode, ids};
  b.insert(b.end(), body.begin(), body.end());
  return b;
}

}  // namespace

int main() {
  const std::string dir = "tests/fuzz/corpus/";
  {
    gguf::Writer w;
    tiny_model(w, "llama", 8, 1, 8);
    save(dir + "gguf/llama-tiny.gguf", with_data(w));
  }
  {
    gguf::Writer w;
    w.set_alignment(64);
    tiny_model(w, "qwen3", 8, 1, 8);
    save(dir + "gguf/qwen3-tiny.gguf", with_data(w));
  }
  {
    gguf::Writer w;
    tiny_model(w, "gemma3", 16, 2, 8);
    save(dir + "gguf/gemma3-header-only.gguf", w.header_bytes());
  }
  save(dir + "tokenizer/gguf-bpe-vocab", prefixed(6, 0, fuzz::vocab_from_lines("a\nb\nab\n\x03<s>\n\na b\n", true, 0)));
  save(dir + "tokenizer/gguf-spm-vocab", prefixed(6, 0, fuzz::vocab_from_lines("\x03<unk>\n\x03<s>\n\x03</s>\n\xE2\x96\x81\na\nb\nab\n\xE2\x96\x81" "ab\n", false, 0)));
  save(dir + "gguf/vocab-only.gguf", fuzz::vocab_from_lines("a\nb\nab\n\nab\n", true, 0));
  return 0;
}
