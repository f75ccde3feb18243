// Bad models and bad requests give clear errors, never a crash: unknown architecture, missing
// tensor, wrong shape, context longer than the model allows, token id out of range, empty input.
#include <catch2/catch.hpp>

#include <functional>

#include "model/gguf_writer.h"
#include "runtime/cpu_forward.h"
#include "test_util.h"

using namespace strata;

namespace {

// Copies a GGUF, letting the caller change metadata and drop or reshape tensors.
std::string rewrite(const std::string& src, const std::string& name,
                    const std::function<void(gguf::Writer&)>& edit_meta,
                    const std::function<bool(gguf::TensorInfo&)>& keep_tensor) {
  auto f = gguf::File::open(src);
  REQUIRE(f.is_ok());
  gguf::Writer w;
  for (const auto& [k, v] : f->metadata()) w.set(k, v);
  edit_meta(w);
  std::vector<gguf::TensorInfo> kept;
  for (auto t : f->tensors())
    if (keep_tensor(t)) kept.push_back(t);
  for (const auto& t : kept) w.add_tensor(t.name, t.type, t.ne);
  const std::string out = (test::temp_dir("bad-model") / name).string();
  REQUIRE(w.begin(out).is_ok());
  for (size_t i = 0; i < kept.size(); ++i) {
    std::vector<uint8_t> zeros(w.tensor_bytes(i), 0);
    REQUIRE(w.write_tensor(i, zeros.data(), zeros.size()).is_ok());
  }
  REQUIRE(w.finish().is_ok());
  return out;
}

const std::string kLlama = "models/llama/model.gguf";
bool contains(const std::string& s, const std::string& sub) { return s.find(sub) != std::string::npos; }

}  // namespace

TEST_CASE("unsupported or broken models are rejected naming the problem", "[runtime][errors]") {
  const std::string src = test::testdata(kLlama);
  auto no_edit = [](gguf::Writer&) {};
  auto keep_all = [](gguf::TensorInfo&) { return true; };

  auto arch = runtime::Model::load(rewrite(src, "arch.gguf",
      [](gguf::Writer& w) { w.set("general.architecture", gguf::Value::string("mamba")); }, keep_all));
  REQUIRE_FALSE(arch.is_ok());
  CHECK(contains(arch.message(), "unsupported architecture 'mamba'"));

  auto missing = runtime::Model::load(rewrite(src, "missing.gguf", no_edit,
      [](gguf::TensorInfo& t) { return t.name != "blk.1.ffn_up.weight"; }));
  REQUIRE_FALSE(missing.is_ok());
  CHECK(contains(missing.message(), "missing tensor 'blk.1.ffn_up.weight'"));

  auto shape = runtime::Model::load(rewrite(src, "shape.gguf", no_edit, [](gguf::TensorInfo& t) {
    if (t.name == "blk.0.attn_k.weight") t.ne = {128, 32};
    return true;
  }));
  REQUIRE_FALSE(shape.is_ok());
  CHECK(contains(shape.message(), "tensor 'blk.0.attn_k.weight' has shape [128, 32], expected [128, 64]"));

  auto key = runtime::Model::load(rewrite(src, "key.gguf",
      [](gguf::Writer& w) { w.set("llama.block_count", gguf::Value::string("three")); }, keep_all));
  REQUIRE_FALSE(key.is_ok());
  CHECK(contains(key.message(), "'llama.block_count' has type string"));

  auto heads = runtime::Model::load(rewrite(src, "heads.gguf",
      [](gguf::Writer& w) { w.set("llama.attention.head_count_kv", gguf::Value::u32(3)); }, keep_all));
  REQUIRE_FALSE(heads.is_ok());
  CHECK(contains(heads.message(), "not a multiple of head_count_kv 3"));

  auto untyped = runtime::Model::load(rewrite(src, "iq.gguf", no_edit, [](gguf::TensorInfo& t) {
    if (t.name == "blk.0.attn_q.weight") { t.type = GgmlType::Q8_1; }  // a type without CPU kernels
    return true;
  }));
  REQUIRE_FALSE(untyped.is_ok());
  CHECK(contains(untyped.message(), "has type q8_1, which strata cannot compute yet"));
}

TEST_CASE("requests beyond the model's limits are rejected", "[runtime][errors]") {
  auto m = runtime::Model::load(test::testdata(kLlama));
  REQUIRE(m.is_ok());
  auto too_long = runtime::CpuForward::create(m.value(), {.n_ctx = 1 << 20, .ubatch = 512, .k_type = GgmlType::F32, .v_type = GgmlType::F32, .placement = {}, .trace = {}});
  REQUIRE_FALSE(too_long.is_ok());
  CHECK(contains(too_long.message(), "longer than the model allows (4096 tokens)"));

  auto fwd = runtime::CpuForward::create(m.value(), {.n_ctx = 8, .ubatch = 4, .placement = {}, .trace = {}});
  REQUIRE(fwd.is_ok());
  std::vector<float> logits;
  const std::vector<int32_t> bad = {2, 512};
  Status s = (*fwd)->eval(bad, runtime::Logits::last, logits);
  REQUIRE_FALSE(s.is_ok());
  CHECK(contains(s.message(), "token id 512 at index 1 is out of range (vocabulary has 512 tokens)"));
  const std::vector<int32_t> negative = {-1};
  CHECK_FALSE((*fwd)->eval(negative, runtime::Logits::last, logits).is_ok());
  CHECK(contains((*fwd)->eval({}, runtime::Logits::last, logits).message(), "empty token list"));
  const std::vector<int32_t> nine(9, 5);
  s = (*fwd)->eval(nine, runtime::Logits::last, logits);
  REQUIRE_FALSE(s.is_ok());
  CHECK(contains(s.message(), "context full"));
  CHECK((*fwd)->n_past() == 0);  // a rejected request leaves the sequence unchanged
}
