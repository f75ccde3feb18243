// export-hf: the safetensors file is read back with a minimal parser written here (not the
// writer's code), and every tensor is checked against the GGUF: names, shapes, dtype, offsets,
// gemma's w - 1 norms, llama's RoPE row un-permutation, and bytes equal elsewhere.
#include <catch2/catch.hpp>

#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "kernels/cpu/quant_kernels.h"
#include "model/gguf_file.h"
#include "model/hf_export.h"
#include "model/model_spec.h"
#include "model/synth.h"
#include "test_util.h"

using namespace strata;
using namespace strata::model;

namespace {

struct StTensor {
  std::string dtype;
  std::vector<uint64_t> shape;
  uint64_t begin = 0, end = 0;
};

struct SafeTensors {
  std::vector<uint8_t> bytes;
  uint64_t data_start = 0;
  std::map<std::string, StTensor> tensors;
  nlohmann::json metadata;

  std::vector<float> floats(const std::string& name) const {
    const StTensor& t = tensors.at(name);
    std::vector<float> v((t.end - t.begin) / 4);
    std::memcpy(v.data(), bytes.data() + data_start + t.begin, v.size() * 4);
    return v;
  }
};

// The format: u64 little-endian header size N, N bytes of JSON, then the data buffer that
// data_offsets index (relative to its start).
SafeTensors read_safetensors(const std::string& path) {
  SafeTensors st;
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in);
  st.bytes.assign(std::istreambuf_iterator<char>(in), {});
  REQUIRE(st.bytes.size() >= 8);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(st.bytes[i]) << (8 * i);
  REQUIRE(8 + n <= st.bytes.size());
  st.data_start = 8 + n;
  const auto header = nlohmann::json::parse(st.bytes.begin() + 8, st.bytes.begin() + 8 + int64_t(n));
  for (const auto& [name, v] : header.items()) {
    if (name == "__metadata__") {
      st.metadata = v;
      continue;
    }
    StTensor t;
    t.dtype = v.at("dtype").get<std::string>();
    t.shape = v.at("shape").get<std::vector<uint64_t>>();
    t.begin = v.at("data_offsets").at(0).get<uint64_t>();
    t.end = v.at("data_offsets").at(1).get<uint64_t>();
    st.tensors[name] = t;
  }
  return st;
}

std::vector<float> dequant(const gguf::TensorInfo& t) {
  std::vector<float> v(t.n_elements);
  const auto* qk = kernels::cpu::quant_kernels(t.type);
  REQUIRE(qk);
  qk->dequantize(t.data, v.data(), int64_t(t.n_elements));
  return v;
}

std::string synth_model(Arch arch, GgmlType type, const std::filesystem::path& dir) {
  SynthOptions o;
  o.arch = arch;
  o.preset = "tiny";
  o.type = type;
  o.progress = false;
  REQUIRE(apply_preset(o).is_ok());
  const std::string path = (dir / fmt::format("{}-{}.gguf", arch_name(arch), ggml_type_info(type).name)).string();
  REQUIRE(write_synthetic_model(o, path).is_ok());
  return path;
}

struct Exported {
  gguf::File file;
  ModelSpec spec;
  SafeTensors st;
  nlohmann::json config;
};

Exported export_model(Arch arch, GgmlType type, const std::string& tag) {
  const auto dir = test::temp_dir(tag);
  const std::string path = synth_model(arch, type, dir);
  auto f = gguf::File::open(path);
  REQUIRE(f.is_ok());
  auto spec = spec_from_gguf(*f);
  REQUIRE(spec.is_ok());
  const std::string out = (dir / "hf").string();
  Status s = export_hf(*f, *spec, out);
  INFO((s.is_ok() ? std::string() : s.message()));
  REQUIRE(s.is_ok());
  std::ifstream cin(out + "/config.json");
  REQUIRE(cin);
  Exported e{std::move(f.value()), std::move(spec.value()), read_safetensors(out + "/model.safetensors"),
             nlohmann::json::parse(cin)};
  REQUIRE_FALSE(std::filesystem::exists(out + "/model.safetensors.partial"));
  return e;
}

// Offsets tile the data buffer exactly, every tensor is F32 and its byte size matches its shape.
void check_layout(const SafeTensors& st) {
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const auto& [name, t] : st.tensors) {
    INFO(name);
    CHECK(t.dtype == "F32");
    uint64_t n = 1;
    for (uint64_t d : t.shape) n *= d;
    CHECK(t.end - t.begin == n * 4);
    ranges.emplace_back(t.begin, t.end);
  }
  std::sort(ranges.begin(), ranges.end());
  uint64_t at = 0;
  for (const auto& [b, e] : ranges) {
    CHECK(b == at);
    at = e;
  }
  CHECK(st.data_start + at == st.bytes.size());
  CHECK(st.metadata.value("format", "") == "pt");
}

}  // namespace

TEST_CASE("RoPE row permutation: un-permute gives HF's rotate-half order and permute inverts it", "[hf]") {
  // One head of 8 rows, row length 1: GGUF pairs (0,1) (2,3) (4,5) (6,7) -> HF halves [0 2 4 6 | 1 3 5 7].
  const float g[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  float h[8], back[8];
  unpermute_rope_rows(g, h, 1, 8, 1);
  const float want[8] = {0, 2, 4, 6, 1, 3, 5, 7};
  for (int i = 0; i < 8; ++i) CHECK(h[i] == want[i]);
  permute_rope_rows(h, back, 1, 8, 1);
  for (int i = 0; i < 8; ++i) CHECK(back[i] == g[i]);

  // Several heads, longer rows: a round trip is the identity, and no head's rows leave it.
  Rng rng(test::fresh_seed());
  const uint32_t n_head = 3, d = 16, row = 5;
  auto src = test::random_normal(n_head * d * row, rng);
  std::vector<float> mid(src.size()), out(src.size());
  unpermute_rope_rows(src.data(), mid.data(), n_head, d, row);
  permute_rope_rows(mid.data(), out.data(), n_head, d, row);
  CHECK(out == src);
  for (uint32_t hh = 0; hh < n_head; ++hh) {
    std::multiset<float> a(src.begin() + hh * d * row, src.begin() + (hh + 1) * d * row);
    std::multiset<float> b(mid.begin() + hh * d * row, mid.begin() + (hh + 1) * d * row);
    CHECK(a == b);
  }
}

TEST_CASE("gemma3 export: names, shapes, norms exported as w - 1, matrices byte-equal", "[hf]") {
  auto e = export_model(Arch::gemma3, GgmlType::F32, "hf_gemma3");
  const HParams& hp = e.spec.hp;
  check_layout(e.st);
  // Tied: no lm_head; 3 globals-less-one + 13 per layer.
  CHECK(e.st.tensors.size() == 2 + 13 * hp.n_layer);
  CHECK(e.st.tensors.count("lm_head.weight") == 0);
  CHECK(e.st.tensors.at("model.embed_tokens.weight").shape == std::vector<uint64_t>{hp.n_vocab, hp.n_embd});
  CHECK(e.st.tensors.at("model.layers.0.self_attn.q_proj.weight").shape ==
        std::vector<uint64_t>{uint64_t(hp.n_head) * hp.n_embd_head, hp.n_embd});
  CHECK(e.st.tensors.at("model.layers.0.self_attn.o_proj.weight").shape ==
        std::vector<uint64_t>{hp.n_embd, uint64_t(hp.n_head) * hp.n_embd_head});
  CHECK(e.st.tensors.at("model.layers.0.mlp.down_proj.weight").shape == std::vector<uint64_t>{hp.n_embd, hp.n_ff});
  CHECK(e.st.tensors.at("model.layers.0.self_attn.k_norm.weight").shape == std::vector<uint64_t>{hp.n_embd_head});

  const std::map<std::string, std::string> norms = {
      {"output_norm.weight", "model.norm.weight"},
      {"blk.0.attn_norm.weight", "model.layers.0.input_layernorm.weight"},
      {"blk.1.attn_q_norm.weight", "model.layers.1.self_attn.q_norm.weight"},
      {"blk.1.attn_k_norm.weight", "model.layers.1.self_attn.k_norm.weight"},
      {"blk.2.post_attention_norm.weight", "model.layers.2.post_attention_layernorm.weight"},
      {"blk.3.ffn_norm.weight", "model.layers.3.pre_feedforward_layernorm.weight"},
      {"blk.5.post_ffw_norm.weight", "model.layers.5.post_feedforward_layernorm.weight"},
  };
  for (const auto& [g, h] : norms) {
    INFO(g << " -> " << h);
    const auto want = dequant(*e.file.find_tensor(g));
    const auto got = e.st.floats(h);
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == want[i] - 1.0f);
  }
  for (const auto& [g, h] : std::map<std::string, std::string>{
           {"token_embd.weight", "model.embed_tokens.weight"},
           {"blk.0.attn_q.weight", "model.layers.0.self_attn.q_proj.weight"},
           {"blk.4.ffn_gate.weight", "model.layers.4.mlp.gate_proj.weight"}}) {
    INFO(g);
    CHECK(e.st.floats(h) == dequant(*e.file.find_tensor(g)));
  }
  const auto& c = e.config;
  CHECK(c["model_type"] == "gemma3_text");
  CHECK(c["head_dim"] == hp.n_embd_head);
  CHECK(c["tie_word_embeddings"] == true);
  CHECK(c["sliding_window"] == hp.n_swa);
  CHECK(c["hidden_activation"] == "gelu_pytorch_tanh");
  REQUIRE(c["layer_types"].size() == hp.n_layer);
  for (uint32_t il = 0; il < hp.n_layer; ++il)
    CHECK(c["layer_types"][il] == (e.spec.is_swa(il) ? "sliding_attention" : "full_attention"));
  CHECK(c["rope_parameters"]["full_attention"]["rope_theta"].get<double>() == Approx(hp.rope_freq_base));
  CHECK(c["rope_parameters"]["sliding_attention"]["rope_theta"].get<double>() == Approx(hp.rope_freq_base_swa));
  CHECK(c["rope_parameters"]["sliding_attention"]["rope_type"] == "default");
  if (hp.rope_scale_linear != 1.0f) {
    CHECK(c["rope_parameters"]["full_attention"]["rope_type"] == "linear");
    CHECK(c["rope_parameters"]["full_attention"]["factor"].get<double>() == Approx(hp.rope_scale_linear));
  }
  CHECK(c["query_pre_attn_scalar"].get<double>() == Approx(hp.query_pre_attn_scalar));
  CHECK_FALSE(c.contains("rope_scaling"));
}

TEST_CASE("llama Q4_K export: q/k rows un-permuted (re-permuting gives the GGUF rows), rest unchanged", "[hf]") {
  auto e = export_model(Arch::llama, GgmlType::Q4_K, "hf_llama");
  const HParams& hp = e.spec.hp;
  check_layout(e.st);
  CHECK(e.st.tensors.size() == 2 + (hp.tied_output ? 0 : 1) + 9 * hp.n_layer);
  CHECK(e.st.tensors.count("lm_head.weight") == (hp.tied_output ? 0u : 1u));
  for (uint32_t il = 0; il < hp.n_layer; ++il) {
    for (auto [role, hf, n_head] : {std::tuple{"attn_q", "q_proj", hp.n_head}, std::tuple{"attn_k", "k_proj", hp.n_head_kv}}) {
      INFO("layer " << il << " " << role);
      const auto gguf_rows = dequant(*e.file.find_tensor(fmt::format("blk.{}.{}.weight", il, role)));
      const auto hf_rows = e.st.floats(fmt::format("model.layers.{}.self_attn.{}.weight", il, hf));
      REQUIRE(hf_rows.size() == gguf_rows.size());
      CHECK(hf_rows != gguf_rows);  // it was permuted
      std::vector<float> back(hf_rows.size());
      permute_rope_rows(hf_rows.data(), back.data(), n_head, hp.n_embd_head, hp.n_embd);
      CHECK(back == gguf_rows);
    }
    CHECK(e.st.floats(fmt::format("model.layers.{}.self_attn.v_proj.weight", il)) ==
          dequant(*e.file.find_tensor(fmt::format("blk.{}.attn_v.weight", il))));
    // llama norms are exported as they are (no +1 convention).
    CHECK(e.st.floats(fmt::format("model.layers.{}.post_attention_layernorm.weight", il)) ==
          dequant(*e.file.find_tensor(fmt::format("blk.{}.ffn_norm.weight", il))));
  }
  CHECK(e.config["model_type"] == "llama");
  CHECK(e.config["rope_scaling"].is_null());
  CHECK(e.config["rope_parameters"]["rope_theta"].get<double>() == Approx(hp.rope_freq_base));
}

TEST_CASE("qwen3 export: QK-norms kept as they are, no permutation", "[hf]") {
  auto e = export_model(Arch::qwen3, GgmlType::F32, "hf_qwen3");
  const HParams& hp = e.spec.hp;
  check_layout(e.st);
  CHECK(e.st.tensors.size() == 2 + (hp.tied_output ? 0 : 1) + 11 * hp.n_layer);
  CHECK(e.st.floats("model.layers.1.self_attn.q_norm.weight") == dequant(*e.file.find_tensor("blk.1.attn_q_norm.weight")));
  CHECK(e.st.floats("model.layers.1.self_attn.q_proj.weight") == dequant(*e.file.find_tensor("blk.1.attn_q.weight")));
  if (!hp.tied_output) CHECK(e.st.floats("lm_head.weight") == dequant(*e.file.find_tensor("output.weight")));
  CHECK(e.config["model_type"] == "qwen3");
  CHECK(e.config["tie_word_embeddings"] == hp.tied_output);
}

TEST_CASE("export-hf reports an unwritable output folder", "[hf]") {
  const auto dir = test::temp_dir("hf_err");
  const std::string path = synth_model(Arch::qwen3, GgmlType::F32, dir);
  auto f = gguf::File::open(path);
  REQUIRE(f.is_ok());
  auto spec = spec_from_gguf(*f);
  REQUIRE(spec.is_ok());
  // A regular file where a parent folder should be.
  std::ofstream(dir / "blocker") << "x";
  Status s = export_hf(*f, *spec, (dir / "blocker" / "out").string());
  REQUIRE_FALSE(s.is_ok());
  CHECK_THAT(s.message(), Catch::Contains("blocker"));
}
