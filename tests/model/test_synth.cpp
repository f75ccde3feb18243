// Synthetic models: complete, deterministic, well-shaped; the 27b preset has gemma3-27B's table.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "kernels/cpu/quant_kernels.h"
#include "model/gguf_file.h"
#include "model/synth.h"
#include "test_util.h"

using namespace strata;
using namespace strata::model;

namespace {

SynthOptions options(Arch arch, const std::string& preset) {
  SynthOptions o;
  o.arch = arch;
  o.preset = preset;
  o.progress = false;
  REQUIRE(apply_preset(o).is_ok());
  return o;
}

std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

}  // namespace

TEST_CASE("tiny synthetic models of every architecture are complete GGUFs", "[synth]") {
  const auto dir = test::temp_dir("synth");
  for (Arch arch : {Arch::gemma3, Arch::llama, Arch::qwen3}) {
    const std::string a(arch_name(arch));
    INFO(a);
    auto o = options(arch, "tiny");
    o.type = GgmlType::Q8_0;
    const std::string path = (dir / (a + ".gguf")).string();
    auto sum = write_synthetic_model(o, path);
    REQUIRE(sum.is_ok());
    CHECK(std::filesystem::file_size(path) == sum->file_bytes);
    CHECK_FALSE(std::filesystem::exists(path + ".partial"));
    auto f = gguf::File::open(path);
    REQUIRE(f.is_ok());
    CHECK(f->architecture() == a);
    CHECK(*f->get_u32(a + ".block_count") == o.hp.n_layer);
    CHECK(*f->get_u32(a + ".embedding_length") == o.hp.n_embd);
    CHECK(*f->get_u32(a + ".attention.head_count_kv") == o.hp.n_head_kv);
    CHECK(*f->get_u32(a + ".attention.key_length") == o.hp.n_embd_head);
    CHECK(f->has(a + ".rope.freq_base"));
    CHECK(f->has(a + ".attention.layer_norm_rms_epsilon"));
    CHECK((*f->get_array("tokenizer.ggml.tokens"))->items.size() == o.hp.n_vocab);
    CHECK((*f->get_array("tokenizer.ggml.scores"))->items.size() == o.hp.n_vocab);
    CHECK(*f->get_string("tokenizer.ggml.model") == "llama");
    if (arch == Arch::gemma3) {
      CHECK(*f->get_u32("gemma3.attention.sliding_window") == o.hp.n_swa);
      CHECK(f->find_tensor("output.weight") == nullptr);  // tied head
      CHECK(f->find_tensor("blk.0.post_ffw_norm.weight") != nullptr);
    }
    if (arch == Arch::llama) CHECK(f->find_tensor("output.weight") != nullptr);
    if (arch != Arch::llama) CHECK(f->find_tensor("blk.0.attn_k_norm.weight") != nullptr);
    const auto table = synth_tensors(o);
    REQUIRE(table.is_ok());
    REQUIRE(f->tensors().size() == table->size());
    for (const auto& t : *table) {
      const auto* ti = f->find_tensor(t.name);
      REQUIRE(ti);
      CHECK(ti->ne == t.ne);
      CHECK(ti->type == t.type);
      // Values are finite and spread: decode each tensor and look at its statistics.
      std::vector<float> v(ti->n_elements);
      kernels::cpu::quant_kernels(ti->type)->dequantize(ti->data, v.data(), int64_t(v.size()));
      double sum2 = 0;
      size_t non_finite = 0;
      for (float x : v) {
        non_finite += !std::isfinite(x);
        sum2 += double(x) * x;
      }
      INFO(t.name);
      REQUIRE(non_finite == 0);
      const double rms = std::sqrt(sum2 / double(v.size()));
      if (t.role == TensorRole::attn_norm) CHECK(rms == Approx(1.0).epsilon(0.1));
      if (t.role == TensorRole::ffn_down) CHECK(rms == Approx(1.0 / std::sqrt(double(o.hp.n_ff))).epsilon(0.3));
    }
  }
}

TEST_CASE("synthetic models are a pure function of options and seed", "[synth]") {
  const auto dir = test::temp_dir("synth-det");
  auto o = options(Arch::qwen3, "tiny");
  o.type = GgmlType::Q4_K;
  o.threads = 1;
  REQUIRE(write_synthetic_model(o, (dir / "a.gguf").string()).is_ok());
  o.threads = 2;
  REQUIRE(write_synthetic_model(o, (dir / "b.gguf").string()).is_ok());
  o.seed = 43;
  REQUIRE(write_synthetic_model(o, (dir / "c.gguf").string()).is_ok());
  const auto a = read_all((dir / "a.gguf").string()), b = read_all((dir / "b.gguf").string()),
             c = read_all((dir / "c.gguf").string());
  CHECK(a == b);
  REQUIRE(a.size() == c.size());
  CHECK(a != c);
}

TEST_CASE("mixes assign llama.cpp-like types and fall back where K blocks do not fit", "[synth]") {
  auto o = options(Arch::gemma3, "27b");
  o.mix = "q3_k_m";
  CHECK(synth_tensor_type(o, TensorRole::token_embd, -1) == GgmlType::Q6_K);  // tied head
  CHECK(synth_tensor_type(o, TensorRole::attn_norm, 0) == GgmlType::F32);
  CHECK(synth_tensor_type(o, TensorRole::attn_q, 10) == GgmlType::Q3_K);
  CHECK(synth_tensor_type(o, TensorRole::attn_v, 0) == GgmlType::Q5_K);
  CHECK(synth_tensor_type(o, TensorRole::attn_v, 10) == GgmlType::Q4_K);
  CHECK(synth_tensor_type(o, TensorRole::attn_output, 10) == GgmlType::Q4_K);
  CHECK(synth_tensor_type(o, TensorRole::ffn_down, 0) == GgmlType::Q5_K);
  CHECK(synth_tensor_type(o, TensorRole::ffn_down, 61) == GgmlType::Q4_K);
  CHECK(synth_tensor_type(o, TensorRole::ffn_down, 20) == GgmlType::Q3_K);
  auto one = options(Arch::gemma3, "1b");  // n_embd 1152 is not a multiple of 256
  one.type = GgmlType::Q4_K;
  CHECK(synth_tensor_type(one, TensorRole::attn_q, 0) == GgmlType::Q5_0);
  CHECK(synth_tensor_type(one, TensorRole::ffn_down, 0) == GgmlType::Q4_K);  // n_ff 6912 = 27 * 256
  o.mix = "q9_k_x";
  CHECK(synth_tensors(o).message().find("unknown mix 'q9_k_x'") != std::string::npos);
}

TEST_CASE("the 27b preset has gemma3-27B's shapes and tensor table", "[synth]") {
  auto o = options(Arch::gemma3, "27b");
  CHECK(o.hp.n_layer == 62);
  CHECK(o.hp.n_embd == 5376);
  CHECK(o.hp.n_head == 32);
  CHECK(o.hp.n_head_kv == 16);
  CHECK(o.hp.n_embd_head == 128);
  CHECK(o.hp.n_ff == 21504);
  CHECK(o.hp.n_vocab == 262144);
  CHECK(o.hp.n_swa == 1024);
  CHECK(o.hp.swa_pattern == 6);
  CHECK(o.hp.rope_freq_base == 1e6f);
  CHECK(o.hp.rope_freq_base_swa == 1e4f);
  CHECK(o.hp.rope_scale_linear == 8.0f);
  CHECK(o.hp.query_pre_attn_scalar == 168.0f);
  o.mix = "q3_k_m";
  o.header_only = true;
  const auto dir = test::temp_dir("synth-27b");
  const std::string path = (dir / "27b.gguf").string();
  auto sum = write_synthetic_model(o, path);
  REQUIRE(sum.is_ok());
  auto f = gguf::File::open(path, {.require_data = false});
  REQUIRE(f.is_ok());
  CHECK_FALSE(f->has_all_data());
  REQUIRE(f->tensors().size() == 2 + 62 * 13);
  uint64_t params = 0, bytes = 0;
  for (const auto& t : f->tensors()) {
    params += t.n_elements;
    bytes += t.n_bytes;
  }
  // gemma3-27B has 27.0 B parameters (5376 x 262144 embedding included), and a Q3_K_M file of it
  // is ~13.4 GB.
  // Hand count: 62 x (2 x 5376x4096 + 2 x 5376x2048 + 3 x 5376x21504 + 4 x 5376 + 2 x 128)
  //             + 5376 x 262144 + 5376.
  CHECK(params == 27009002240ull);
  CHECK(sum->n_params == params);
  CHECK(double(sum->file_bytes) == Approx(13.4e9).epsilon(0.04));
  // The full size counts every tensor once, plus at most one alignment pad per tensor.
  CHECK(sum->file_bytes >= f->data_offset() + bytes);
  CHECK(sum->file_bytes < f->data_offset() + bytes + f->tensors().size() * f->alignment());
  const auto* q = f->find_tensor("blk.61.attn_q.weight");
  REQUIRE(q);
  CHECK(q->ne == std::vector<uint64_t>{5376, 4096});
  CHECK(f->find_tensor("blk.5.attn_k.weight")->ne == std::vector<uint64_t>{5376, 2048});
  CHECK(f->find_tensor("blk.0.ffn_down.weight")->ne == std::vector<uint64_t>{21504, 5376});
  CHECK(f->find_tensor("token_embd.weight")->ne == std::vector<uint64_t>{5376, 262144});
  CHECK(f->find_tensor("blk.0.attn_q_norm.weight")->ne == std::vector<uint64_t>{128});
  CHECK(*f->get_f32("gemma3.rope.scaling.factor") == 8.0f);
}

TEST_CASE("bad synth options are rejected with the reason", "[synth]") {
  SynthOptions o;
  o.arch = Arch::llama;
  o.preset = "27b";
  CHECK(apply_preset(o).message().find("no preset '27b' for llama") != std::string::npos);
  o = options(Arch::llama, "tiny");
  o.hp.n_head_kv = 3;
  CHECK(validate(o.hp, o.arch).message().find("not a multiple of n_head_kv") != std::string::npos);
  o = options(Arch::llama, "tiny");
  o.hp.n_vocab = 10;
  CHECK(validate(o.hp, o.arch).message().find("n_vocab 10") != std::string::npos);
  o = options(Arch::llama, "tiny");
  auto r = write_synthetic_model(o, "/nonexistent-dir/x.gguf");
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.message().find("/nonexistent-dir/x.gguf.partial") != std::string::npos);
}
