// convert (hf_import) is the inverse of export-hf: GGUF -> HF -> GGUF gives the same tensors,
// the same hyperparameters and the same logits on the independent test models; bad checkpoints
// are refused with the key or tensor that is wrong.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "logits_compare.h"
#include "model/gguf_file.h"
#include "model/hf_export.h"
#include "model/hf_import.h"
#include "model/model_spec.h"
#include "runtime/engine.h"
#include "test_util.h"

using namespace strata;
using namespace strata::model;

namespace {

std::string import_to_gguf(const std::string& hf_dir, GgmlType outtype, const std::string& out) {
  auto m = open_hf_model(hf_dir);
  INFO((m.is_ok() ? std::string() : m.message()));
  REQUIRE(m.is_ok());
  gguf::Writer w;
  set_hf_metadata(*m, outtype, w);
  HfImportOptions o;
  o.outtype = outtype;
  o.progress = false;
  auto bytes = write_hf_tensors(*m, o, w, out);
  INFO((bytes.is_ok() ? std::string() : bytes.message()));
  REQUIRE(bytes.is_ok());
  return out;
}

std::vector<float> logits(const std::string& path, const std::vector<int32_t>& tokens) {
  auto m = runtime::Model::load(path);
  INFO((m.is_ok() ? std::string() : m.message()));
  REQUIRE(m.is_ok());
  auto e = runtime::make_engine(*m, runtime::ForwardOptions{.n_ctx = 256, .ubatch = 64, .k_type = GgmlType::F32, .v_type = GgmlType::F32, .placement = {}, .trace = {}}, runtime::Device::cpu);
  REQUIRE(e.is_ok());
  std::vector<float> out;
  REQUIRE((*e)->eval(tokens, runtime::Logits::all, out).is_ok());
  return out;
}

void write_text(const std::filesystem::path& p, const std::string& s) {
  std::ofstream f(p);
  f << s;
}

}  // namespace

TEST_CASE("GGUF -> export-hf -> convert reproduces tensors, hyperparameters and logits", "[convert]") {
  for (const char* name : {"gemma3-swa", "llama", "qwen3"}) {
    INFO(name);
    const std::string base = test::testdata(std::string("models/") + name + "/");
    const auto dir = test::temp_dir(std::string("convert-") + name);
    auto src = gguf::File::open(base + "model.gguf");
    REQUIRE(src.is_ok());
    auto spec = spec_from_gguf(*src);
    REQUIRE(spec.is_ok());
    REQUIRE(export_hf(*src, *spec, (dir / "hf").string()).is_ok());
    const std::string out = import_to_gguf((dir / "hf").string(), GgmlType::F32, (dir / "back.gguf").string());

    auto back = gguf::File::open(out);
    REQUIRE(back.is_ok());
    auto spec2 = spec_from_gguf(*back);
    REQUIRE(spec2.is_ok());
    CHECK(spec2->summary() == spec->summary());
    CHECK(spec2->hp.rope_freq_base == spec->hp.rope_freq_base);
    CHECK(spec2->hp.rope_freq_base_swa == spec->hp.rope_freq_base_swa);
    CHECK(spec2->hp.rope_scale_linear == spec->hp.rope_scale_linear);
    CHECK(spec2->hp.rms_eps == spec->hp.rms_eps);
    CHECK(spec2->hp.n_ctx_train == spec->hp.n_ctx_train);
    CHECK(spec2->attention_scale == spec->attention_scale);
    CHECK(spec2->swa_layers == spec->swa_layers);
    // Every tensor: same name, shape and f32 values (gemma norms go through w - 1 + 1, exact for
    // weights in [0.5, 2]; allow one ulp elsewhere).
    CHECK(back->tensors().size() == src->tensors().size());
    for (const auto& t : src->tensors()) {
      INFO(t.name);
      const auto* u = back->find_tensor(t.name);
      REQUIRE(u);
      CHECK(u->ne == t.ne);
      REQUIRE(u->type == GgmlType::F32);
      REQUIRE(t.type == GgmlType::F32);
      const auto* a = reinterpret_cast<const float*>(t.data);
      const auto* b = reinterpret_cast<const float*>(u->data);
      size_t worse = 0;
      for (uint64_t i = 0; i < t.n_elements; ++i)
        worse += std::fabs(a[i] - b[i]) > std::fabs(a[i]) * 1.2e-7f;
      CHECK(worse == 0);
    }
    const auto tokens = test::read_tokens(base + "tokens.txt");
    const auto ref = logits(base + "model.gguf", tokens);
    const auto got = logits(out, tokens);
    const auto c = test::compare_logits(got, ref, ref.size() / tokens.size(), 1e-3);
    CHECK(c.worst_ratio < 1e-6);
    CHECK(c.top1_mismatch == 0);

    // f16 output: matrices f16, norms f32, logits close.
    const std::string h = import_to_gguf((dir / "hf").string(), GgmlType::F16, (dir / "f16.gguf").string());
    auto hf16 = gguf::File::open(h);
    REQUIRE(hf16.is_ok());
    CHECK(hf16->find_tensor("token_embd.weight")->type == GgmlType::F16);
    CHECK(hf16->find_tensor("output_norm.weight")->type == GgmlType::F32);
    CHECK(*hf16->get_u32("general.file_type") == 1);
    const auto c16 = test::compare_logits(logits(h, tokens), ref, ref.size() / tokens.size(), 1e-2);
    CHECK(c16.worst_ratio < 5e-3);
  }
}

TEST_CASE("convert refuses checkpoints strata cannot run, naming the reason", "[convert]") {
  const std::string base = test::testdata("models/gemma3-swa/");
  const auto dir = test::temp_dir("convert-bad");
  auto src = gguf::File::open(base + "model.gguf");
  REQUIRE(src.is_ok());
  auto spec = spec_from_gguf(*src);
  REQUIRE(spec.is_ok());
  const auto hf = dir / "hf";
  REQUIRE(export_hf(*src, *spec, hf.string()).is_ok());
  std::ifstream in(hf / "config.json");
  const auto good = nlohmann::json::parse(in);

  auto expect = [&](const nlohmann::json& config, const std::string& needle) {
    write_text(hf / "config.json", config.dump());
    auto m = open_hf_model(hf.string());
    REQUIRE_FALSE(m.is_ok());
    INFO(m.message());
    CHECK(m.message().find(needle) != std::string::npos);
  };
  auto c = good;
  c["final_logit_softcapping"] = 30.0;
  expect(c, "softcap");
  c = good;
  c["model_type"] = "gpt_neox";
  expect(c, "model_type 'gpt_neox' is not supported");
  c = good;
  c["query_pre_attn_scalar"] = 100;
  expect(c, "query_pre_attn_scalar");
  c = good;
  c["rope_parameters"]["full_attention"] = {{"rope_type", "yarn"}, {"rope_theta", 1e6}, {"factor", 8.0}};
  expect(c, "RoPE scaling 'yarn'");
  c = good;
  c["hidden_size"] = good["hidden_size"].get<int>() * 2;
  expect(c, "has shape");
  c = good;
  c["layer_types"][0] = "full_attention";
  expect(c, "layer_types: layer");
  c = good;
  c.erase("vocab_size");
  expect(c, "vocab_size");
  write_text(hf / "config.json", good.dump());
  REQUIRE(open_hf_model(hf.string()).is_ok());

  // A truncated safetensors file: offsets beyond the data.
  const auto st = hf / "model.safetensors";
  std::filesystem::resize_file(st, std::filesystem::file_size(st) - 4);
  auto m = open_hf_model(hf.string());
  REQUIRE_FALSE(m.is_ok());
  CHECK(m.message().find("data_offsets") != std::string::npos);
  std::filesystem::remove(st);
  m = open_hf_model(hf.string());
  REQUIRE_FALSE(m.is_ok());
  CHECK(m.message().find("neither model.safetensors nor model.safetensors.index.json") != std::string::npos);
  CHECK_FALSE(open_hf_model((dir / "absent").string()).is_ok());
}
