// SentencePiece tokenizer.model -> GGUF vocabulary (what `strata convert` stores): strata's SPM
// tokenizer must give SentencePiece's own ids. The fixture is the tokenizer of strata's default
// model (tools/train/tokenize.py) and ids written by Debian's `spm_encode --output_format=id`
// (one line of text -> one line of ids), so the reference is independent of strata.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "model/gguf_file.h"
#include "model/gguf_writer.h"
#include "test_util.h"
#include "tokenizer/spm_model.h"
#include "tokenizer/tokenizer.h"

using namespace strata;

namespace {

const std::string kDir = std::string(STRATA_SOURCE_DIR) + "/tests/data/tokenizer/strata-spm/";

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

}  // namespace

TEST_CASE("a SentencePiece BPE model encodes in strata exactly as spm_encode does", "[tokenizer][spm]") {
  auto m = tokenizer::parse_spm_model(kDir + "tokenizer.model");
  INFO((m.is_ok() ? std::string() : m.message()));
  REQUIRE(m.is_ok());
  CHECK(m->model_type == 2);
  CHECK(m->byte_fallback);
  CHECK(m->normalizer == "identity");
  CHECK(m->pieces.size() == 8192);
  CHECK(m->pieces[0] == "<unk>");
  CHECK(m->types[0] == 2);
  CHECK(m->types[1] == 3);  // <s>: control
  CHECK(m->bos_id == 1);
  CHECK(m->eos_id == 2);
  CHECK(m->pad_id == -1);
  CHECK(m->pieces[3] == "<0x00>");
  CHECK(m->types[3] == 6);  // byte pieces follow the control pieces

  gguf::Writer w;
  w.set("general.architecture", gguf::Value::string("llama"));
  REQUIRE(tokenizer::set_spm_vocab(*m, w).is_ok());
  const auto path = (test::temp_dir("spm-model") / "vocab.gguf").string();
  REQUIRE(w.write_header_only(path).is_ok());
  auto f = gguf::File::open(path, {.require_data = false});
  REQUIRE(f.is_ok());
  auto tok = tokenizer::Tokenizer::from_gguf(*f);
  REQUIRE(tok.is_ok());
  CHECK(tok->bos() == 1);

  const auto text = lines_of(kDir + "sample.txt");
  const auto ids = lines_of(kDir + "sample.ids");
  REQUIRE(text.size() == ids.size());
  REQUIRE(text.size() > 20);
  for (size_t i = 0; i < text.size(); ++i) {
    INFO("line " << i + 1 << ": " << text[i]);
    std::vector<int32_t> want;
    std::istringstream s(ids[i]);
    for (int32_t id; s >> id;) want.push_back(id);
    CHECK(tok->encode(text[i], false, false) == want);
  }
}

TEST_CASE("a malformed tokenizer.model is refused with the byte offset", "[tokenizer][spm]") {
  const auto dir = test::temp_dir("spm-bad");
  std::ifstream in(kDir + "tokenizer.model", std::ios::binary);
  std::string bytes{std::istreambuf_iterator<char>(in), {}};
  REQUIRE(bytes.size() > 1000);
  const auto cut = (dir / "cut.model").string();
  std::ofstream(cut, std::ios::binary) << bytes.substr(0, 777);
  auto m = tokenizer::parse_spm_model(cut);
  REQUIRE_FALSE(m.is_ok());
  CHECK(m.message().find("not a SentencePiece model") != std::string::npos);
  CHECK(m.message().find("runs past the end at byte") != std::string::npos);
  CHECK_FALSE(tokenizer::parse_spm_model((dir / "absent.model").string()).is_ok());
}
