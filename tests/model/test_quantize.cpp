// strata quantize: every re-encoded tensor equals a direct quantisation of the source with the
// reference quantiser, mixes follow the shared rules, metadata travels, logits stay close, and bad
// input is refused with a message naming the problem.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "kernels/cpu/quant_kernels.h"
#include "logits_compare.h"
#include "model/gguf_file.h"
#include "model/gguf_writer.h"
#include "model/model_spec.h"
#include "model/quant_mix.h"
#include "model/quantize.h"
#include "model/synth.h"
#include "runtime/engine.h"
#include "test_util.h"

using namespace strata;
using namespace strata::model;

namespace {

QuantizeOptions opts(const std::string& type, int threads = 0) {
  auto t = parse_quantize_target(type);
  REQUIRE(t.is_ok());
  QuantizeOptions o;
  o.target = *t;
  o.threads = threads;
  o.progress = false;
  return o;
}

std::vector<float> decode(const gguf::TensorInfo& t) {
  std::vector<float> v(t.n_elements);
  const auto* k = kernels::cpu::quant_kernels(t.type);
  REQUIRE(k);
  const uint64_t row_bytes = ggml_row_bytes(t.type, t.ne[0]);
  for (uint64_t r = 0; r < t.rows(); ++r) k->dequantize(t.data + r * row_bytes, v.data() + r * t.ne[0], int64_t(t.ne[0]));
  return v;
}

std::vector<float> logits(const std::string& path, const std::vector<int32_t>& tokens) {
  auto m = runtime::Model::load(path);
  REQUIRE(m.is_ok());
  auto e = runtime::make_engine(*m, {.n_ctx = 256, .ubatch = 64, .k_type = GgmlType::F32, .v_type = GgmlType::F32, .placement = {}, .trace = {}}, runtime::Device::cpu);
  REQUIRE(e.is_ok());
  std::vector<float> out;
  REQUIRE((*e)->eval(tokens, runtime::Logits::all, out).is_ok());
  return out;
}

std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

}  // namespace

TEST_CASE("q8_0 re-encodes every matrix exactly as the reference quantiser does", "[quantize]") {
  const std::string base = test::testdata("models/gemma3-swa/");
  const auto dir = test::temp_dir("quantize-q8");
  const std::string out = (dir / "q8_0.gguf").string();
  auto sum = quantize_model(base + "model.gguf", out, opts("q8_0"));
  REQUIRE(sum.is_ok());
  CHECK(std::filesystem::file_size(out) == sum->out_bytes);
  CHECK_FALSE(std::filesystem::exists(out + ".partial"));
  auto in = gguf::File::open(base + "model.gguf");
  auto q = gguf::File::open(out);
  REQUIRE(in.is_ok());
  REQUIRE(q.is_ok());
  // Metadata (tokenizer included) travels; only the file type says what changed.
  for (const auto& [key, value] : in->metadata()) {
    INFO(key);
    REQUIRE(q->find(key));
    if (key != "general.file_type") CHECK(*q->find(key) == value);
  }
  CHECK(*q->get_u32("general.file_type") == 7);
  REQUIRE(q->tensors().size() == in->tensors().size());
  uint32_t n_q8 = 0;
  for (const auto& src : in->tensors()) {
    INFO(src.name);
    const auto* t = q->find_tensor(src.name);
    REQUIRE(t);
    CHECK(t->ne == src.ne);
    if (src.ne.size() == 1) {  // norms: unchanged f32
      CHECK(t->type == GgmlType::F32);
      CHECK(std::memcmp(t->data, src.data, src.n_bytes) == 0);
      continue;
    }
    REQUIRE(t->type == GgmlType::Q8_0);
    ++n_q8;
    const auto f = decode(src);
    std::vector<uint8_t> want(t->n_bytes);
    const uint64_t row_bytes = ggml_row_bytes(GgmlType::Q8_0, src.ne[0]);
    for (uint64_t r = 0; r < src.rows(); ++r)
      kernels::cpu::quant_kernels(GgmlType::Q8_0)->quantize(f.data() + r * src.ne[0], want.data() + r * row_bytes,
                                                            int64_t(src.ne[0]));
    CHECK(std::memcmp(t->data, want.data(), want.size()) == 0);
    // And the decoded weights are near the source: q8_0 steps are d <= max|tensor| / 127, and
    // rounding to them leaves an RMS error of ~d / sqrt(12) = 0.29 d (the quantiser may trade the
    // largest error for a lower RMS one, so the bound is on the RMS).
    const auto g = decode(*t);
    double se = 0, max_abs = 0;
    for (size_t i = 0; i < f.size(); ++i) {
      se += double(g[i] - f[i]) * (g[i] - f[i]);
      max_abs = std::max(max_abs, double(std::fabs(f[i])));
    }
    CHECK(std::sqrt(se / double(f.size())) <= max_abs / 127 * 0.3);
  }
  CHECK(n_q8 == sum->n_requantized);
  CHECK(n_q8 == 1 + 6 * 7);  // token_embd + 7 matrices in each of 6 layers

  // The quantised model runs, and its logits stay close to the f32 model's.
  const auto tokens = test::read_tokens(base + "tokens.txt");
  const auto ref = logits(base + "model.gguf", tokens);
  const auto got = logits(out, tokens);
  const auto c = test::compare_logits(got, ref, ref.size() / tokens.size(), 0.05);
  INFO("worst max|diff| / max|logit| = " << c.worst_ratio);
  CHECK(c.worst_ratio < 0.05);  // random weights are harsh on 8 bits: ~3% measured
  CHECK(c.top1_mismatch == 0);
}

TEST_CASE("mixes follow the shared per-tensor rules, with K fallbacks, and do not depend on threads",
          "[quantize]") {
  const auto dir = test::temp_dir("quantize-mix");
  SynthOptions so;
  so.arch = Arch::gemma3;
  so.progress = false;
  REQUIRE(apply_preset(so).is_ok());  // tiny: n_embd 256, n_ff 512 (K blocks fit), q width 256
  so.hp.n_layer = 8;
  so.type = GgmlType::F16;
  const std::string src = (dir / "f16.gguf").string();
  REQUIRE(write_synthetic_model(so, src).is_ok());
  auto in = gguf::File::open(src);
  REQUIRE(in.is_ok());
  auto spec = spec_from_gguf(*in);
  REQUIRE(spec.is_ok());

  const std::string a = (dir / "a.gguf").string(), b = (dir / "b.gguf").string();
  REQUIRE(quantize_model(src, a, opts("Q4_K_M", 1)).is_ok());
  REQUIRE(quantize_model(src, b, opts("q4_k_m", 2)).is_ok());
  CHECK(read_all(a) == read_all(b));

  auto q = gguf::File::open(a);
  REQUIRE(q.is_ok());
  CHECK(*q->get_u32("general.file_type") == 15);
  bool saw_q6k = false, saw_q4k = false;
  for (const auto& t : q->tensors()) {
    INFO(t.name);
    const auto named = role_from_tensor_name(t.name);
    REQUIRE(named);
    const GgmlType want = mix_tensor_type("q4_k_m", GgmlType::Q4_K, named->role, named->layer, spec->hp, t.ne[0]);
    CHECK(t.type == want);
    saw_q6k |= t.type == GgmlType::Q6_K;
    saw_q4k |= t.type == GgmlType::Q4_K;
    if (t.ne.size() == 1) continue;
    // Decoded weights stay near the source: relative RMS error of a 4-6 bit code.
    const auto f = decode(*in->find_tensor(t.name));
    const auto g = decode(t);
    double se = 0, ss = 0;
    for (size_t i = 0; i < f.size(); ++i) {
      se += double(g[i] - f[i]) * (g[i] - f[i]);
      ss += double(f[i]) * f[i];
    }
    CHECK(std::sqrt(se / ss) < 0.12);
  }
  CHECK(saw_q6k);
  CHECK(saw_q4k);
  // The tied embedding is quantised like the head.
  CHECK(q->find_tensor("token_embd.weight")->type == GgmlType::Q6_K);
}

TEST_CASE("quantize refuses bad input with a message naming the problem", "[quantize]") {
  const auto dir = test::temp_dir("quantize-bad");
  const std::string model = test::testdata("models/gemma3-swa/model.gguf");
  auto bad = parse_quantize_target("q9_9");
  REQUIRE_FALSE(bad.is_ok());
  CHECK(bad.message().find("unknown quantisation type 'q9_9'") != std::string::npos);
  CHECK(bad.message().find("q4_k_m") != std::string::npos);

  auto missing = quantize_model((dir / "nope.gguf").string(), (dir / "o.gguf").string(), opts("q8_0"));
  REQUIRE_FALSE(missing.is_ok());
  CHECK(missing.message().find("nope.gguf") != std::string::npos);

  // q8_0 blocks are 32 wide: a model whose rows are 16 long cannot be encoded.
  SynthOptions so;
  so.arch = Arch::llama;
  so.progress = false;
  REQUIRE(apply_preset(so).is_ok());
  so.hp.n_embd = 256;
  so.hp.n_ff = 512;
  const std::string ok = (dir / "ok.gguf").string();
  REQUIRE(write_synthetic_model(so, ok).is_ok());
  // Rewrite one matrix with 16-wide rows: copy the file's metadata, reshape ffn_down.
  auto f = gguf::File::open(ok);
  REQUIRE(f.is_ok());
  gguf::Writer w;
  for (const auto& [k, v] : f->metadata()) w.set(k, v);
  std::vector<size_t> idx;
  for (const auto& t : f->tensors()) {
    auto ne = t.ne;
    if (t.name == "blk.0.ffn_down.weight") ne = {16, t.n_elements / 16};
    idx.push_back(w.add_tensor(t.name, t.type, ne));
  }
  const std::string odd = (dir / "odd.gguf").string();
  REQUIRE(w.begin(odd).is_ok());
  for (size_t i = 0; i < idx.size(); ++i)
    REQUIRE(w.write_tensor(idx[i], f->tensors()[i].data, f->tensors()[i].n_bytes).is_ok());
  REQUIRE(w.finish().is_ok());
  auto r = quantize_model(odd, (dir / "o.gguf").string(), opts("q8_0"));
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.message().find("'blk.0.ffn_down.weight' has rows of 16 elements, not a multiple of q8_0's block size 32") !=
        std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir / "o.gguf"));
  CHECK_FALSE(std::filesystem::exists(dir / "o.gguf.partial"));
}
