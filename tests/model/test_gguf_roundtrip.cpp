// Writer <-> reader round trips, and the strongest check we have that the writer produces files
// llama.cpp accepts: re-writing llama.cpp's own GGUFs reproduces them byte for byte.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "model/gguf_file.h"
#include "model/gguf_writer.h"
#include "test_util.h"

using namespace strata;
using gguf::Value;

namespace {

std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

}  // namespace

TEST_CASE("writer output reads back: every value type, nested arrays, tensors", "[gguf]") {
  const auto dir = test::temp_dir("gguf-roundtrip");
  const std::string path = (dir / "rt.gguf").string();
  gguf::Writer w;
  w.set_alignment(64);
  w.set("t.u8", Value::u8(200));
  w.set("t.i8", Value::i8(-100));
  w.set("t.u16", Value::u16(60000));
  w.set("t.i16", Value::i16(-30000));
  w.set("t.u32", Value::u32(4000000000u));
  w.set("t.i32", Value::i32(-2000000000));
  w.set("t.u64", Value::u64(1ull << 60));
  w.set("t.i64", Value::i64(-(1ll << 60)));
  w.set("t.f32", Value::f32(0.1f));
  w.set("t.f64", Value::f64(1e300));
  w.set("t.bool", Value::boolean(true));
  w.set("t.str", Value::string("héllo\nworld"));
  w.set("t.strs", Value::string_array({"a", "", "ccc"}));
  gguf::Array inner1{gguf::ValueType::i32, {Value::i32(1), Value::i32(2)}};
  gguf::Array inner2{gguf::ValueType::i32, {}};
  w.set("t.nested", Value::array({gguf::ValueType::array, {Value::array(inner1), Value::array(inner2)}}));
  w.set("t.u32", Value::u32(7));  // replaces, keeps position

  Rng rng(test::fresh_seed());
  std::vector<float> a(3 * 64);
  for (auto& x : a) x = rng.normal();
  std::vector<uint8_t> q(ggml_row_bytes(GgmlType::Q4_K, 512) * 2);
  for (auto& b : q) b = uint8_t(rng.next_u32());
  const size_t ia = w.add_tensor("a", GgmlType::F32, {64, 3});
  const size_t iq = w.add_tensor("blk.0.q", GgmlType::Q4_K, {512, 2});
  REQUIRE(w.tensor_bytes(ia) == a.size() * 4);
  REQUIRE(w.begin(path).is_ok());
  // Written in two ranges, out of order, as the multi-threaded generator does.
  REQUIRE(w.write_tensor_range(iq, q.size() / 2, q.data() + q.size() / 2, q.size() / 2).is_ok());
  REQUIRE(w.write_tensor_range(iq, 0, q.data(), q.size() / 2).is_ok());
  REQUIRE(w.write_tensor(ia, a.data(), a.size() * 4).is_ok());
  REQUIRE(w.finish(true).is_ok());
  REQUIRE(std::filesystem::file_size(path) == w.total_bytes());

  auto f = gguf::File::open(path);
  REQUIRE(f.is_ok());
  CHECK(f->version() == 3);
  CHECK(f->alignment() == 64);
  CHECK(f->data_offset() % 64 == 0);
  CHECK(f->has_all_data());
  CHECK(*f->get_uint("t.u8") == 200);
  CHECK(*f->get_int("t.i8") == -100);
  CHECK(*f->get_u32("t.u32") == 7);
  CHECK(f->metadata()[1].first == "t.u8");  // general.alignment first, then insertion order
  CHECK(*f->get_int("t.i64") == -(1ll << 60));
  CHECK(*f->get_uint("t.u64") == (1ull << 60));
  CHECK(*f->get_f32("t.f32") == 0.1f);
  CHECK(*f->get_float("t.f64") == 1e300);
  CHECK(*f->get_bool("t.bool"));
  CHECK(*f->get_string("t.str") == "héllo\nworld");
  const auto* nested = *f->get_array("t.nested");
  REQUIRE(nested->items.size() == 2);
  CHECK(std::get<gguf::Array>(nested->items[0].data).items.size() == 2);
  CHECK(std::get<gguf::Array>(nested->items[1].data).items.empty());
  // Typed access: wrong types are errors naming the key, defaults only for missing keys.
  CHECK_FALSE(f->get_string("t.u8").is_ok());
  CHECK(f->get_string("t.u8").message().find("'t.u8' has type u8, expected string") != std::string::npos);
  CHECK_FALSE(f->get_uint("t.i8").is_ok());  // negative
  CHECK_FALSE(f->get_u32("t.u64").is_ok());  // does not fit
  CHECK(*f->get_u32("t.missing", 5) == 5);
  CHECK_FALSE(f->get_u32("t.str", 5).is_ok());
  CHECK(f->get_uint("t.missing").message().find("missing metadata key 't.missing'") != std::string::npos);

  const auto* ta = f->find_tensor("a");
  const auto* tq = f->find_tensor("blk.0.q");
  REQUIRE(ta);
  REQUIRE(tq);
  CHECK(ta->ne == std::vector<uint64_t>{64, 3});
  CHECK(ta->rows() == 3);
  CHECK(tq->type == GgmlType::Q4_K);
  CHECK(tq->n_bytes == q.size());
  CHECK(std::memcmp(ta->data, a.data(), a.size() * 4) == 0);
  CHECK(std::memcmp(tq->data, q.data(), q.size()) == 0);
  CHECK((tq->data - ta->data) % 64 == 0);

  // Header-only: cut the file inside the data section; it opens without data, and the tensors
  // past the cut have no data pointer.
  const std::string cut = (dir / "cut.gguf").string();
  {
    auto bytes = read_all(path);
    bytes.resize(f->data_offset() + 10);
    std::ofstream(cut, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), long(bytes.size()));
  }
  CHECK_FALSE(gguf::File::open(cut).is_ok());
  auto h = gguf::File::open(cut, {.require_data = false});
  REQUIRE(h.is_ok());
  CHECK_FALSE(h->has_all_data());
  CHECK(h->find_tensor("a")->data == nullptr);
  CHECK(h->tensors().size() == 2);
}

TEST_CASE("re-writing llama.cpp's GGUF files reproduces them byte for byte", "[gguf]") {
  const char* files[] = {"models/llama/model.gguf", "models/qwen3/model.gguf", "models/gemma3-swa/model.gguf",
                         "models/gemma3-swa-q4k/model.gguf", "quant/q4_k.gguf", "quant/q3_k.gguf",
                         "tokenizer/ggml-vocab-llama-spm.gguf"};
  const auto dir = test::temp_dir("gguf-rewrite");
  for (const char* rel : files) {
    const std::string src = test::testdata(rel);
    INFO(src);
    auto f = gguf::File::open(src);
    REQUIRE(f.is_ok());
    gguf::Writer w;
    if (f->has("general.alignment")) w.set_alignment(f->alignment());
    for (const auto& [k, v] : f->metadata()) w.set(k, v);
    for (const auto& t : f->tensors()) w.add_tensor(t.name, t.type, t.ne);
    const std::string out = (dir / "copy.gguf").string();
    REQUIRE(w.begin(out).is_ok());
    for (size_t i = 0; i < f->tensors().size(); ++i)
      REQUIRE(w.write_tensor(i, f->tensors()[i].data, f->tensors()[i].n_bytes).is_ok());
    REQUIRE(w.finish().is_ok());
    const auto a = read_all(src), b = read_all(out);
    CHECK(a.size() == b.size());
    CHECK(a == b);
    auto g = gguf::File::open(out);
    REQUIRE(g.is_ok());
    REQUIRE(g->metadata().size() == f->metadata().size());
    for (size_t i = 0; i < f->metadata().size(); ++i)
      CHECK(g->metadata()[i].second == f->metadata()[i].second);
  }
}
