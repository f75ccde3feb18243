#include "model/synth.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/progress.h"
#include "kernels/cpu/quant_kernels.h"
#include "model/gguf_parallel_write.h"
#include "model/gguf_writer.h"
#include "model/hparams_metadata.h"
#include "model/quant_mix.h"
#include "model/synth_vocab.h"

namespace strata::model {
namespace {

struct Preset {
  const char* name;
  Arch arch;
  HParams hp;
};

HParams make_hp(uint32_t vocab, uint32_t ctx, uint32_t embd, uint32_t layers, uint32_t heads,
                uint32_t kv_heads, uint32_t head_dim, uint32_t ff) {
  HParams hp;
  hp.n_vocab = vocab; hp.n_ctx_train = ctx; hp.n_embd = embd; hp.n_layer = layers;
  hp.n_head = heads; hp.n_head_kv = kv_heads; hp.n_embd_head = head_dim; hp.n_ff = ff;
  return hp;
}

HParams gemma3(HParams hp, uint32_t window, float qpas) {
  hp.rms_eps = 1e-6f;
  hp.rope_freq_base = 1e6f;
  hp.rope_freq_base_swa = 1e4f;
  hp.rope_scale_linear = 8.0f;
  hp.n_swa = window;
  hp.swa_pattern = 6;
  hp.query_pre_attn_scalar = qpas;
  hp.tied_output = true;
  return hp;
}

HParams llama(HParams hp, bool tied) {
  hp.rms_eps = 1e-5f;
  hp.rope_freq_base = 5e5f;
  hp.tied_output = tied;
  return hp;
}

HParams qwen3(HParams hp, bool tied) {
  hp.rms_eps = 1e-6f;
  hp.rope_freq_base = 1e6f;
  hp.tied_output = tied;
  return hp;
}

// Shapes of public models (facts from their configs): gemma3-1b/27b, Llama-3.2-1B, Qwen3-1.7B.
const std::vector<Preset>& presets() {
  static const std::vector<Preset> kPresets = {
      {"tiny", Arch::gemma3, gemma3(make_hp(1024, 2048, 256, 6, 4, 2, 64, 512), 64, 64)},
      {"tiny", Arch::llama, llama(make_hp(1024, 2048, 256, 4, 4, 2, 64, 512), false)},
      {"tiny", Arch::qwen3, qwen3(make_hp(1024, 2048, 256, 4, 4, 2, 64, 512), true)},
      {"1b", Arch::gemma3, gemma3(make_hp(262144, 32768, 1152, 26, 4, 1, 256, 6912), 512, 256)},
      {"1b", Arch::llama, llama(make_hp(128256, 131072, 2048, 16, 32, 8, 64, 8192), true)},
      {"1b", Arch::qwen3, qwen3(make_hp(151936, 40960, 2048, 28, 16, 8, 128, 6144), true)},
      {"27b", Arch::gemma3, gemma3(make_hp(262144, 131072, 5376, 62, 32, 16, 128, 21504), 1024, 168)},
  };
  return kPresets;
}

void write_metadata(gguf::Writer& w, const SynthOptions& o) {
  using gguf::Value;
  const HParams& hp = o.hp;
  set_hparams_metadata(w, o.arch, hp);
  w.set("general.name", Value::string(fmt::format("strata-synth-{}-{}", arch_name(o.arch), o.preset)));
  w.set("general.file_type", Value::u32(file_type_id(o.mix, o.type)));
  w.set("general.quantization_version", Value::u32(2));
  w.set("strata.synth.seed", Value::u64(o.seed));
  const SynthVocab v = make_synth_vocab(hp.n_vocab);
  w.set("tokenizer.ggml.model", Value::string("llama"));
  w.set("tokenizer.ggml.tokens", Value::string_array(v.tokens));
  w.set("tokenizer.ggml.scores", Value::f32_array(v.scores));
  w.set("tokenizer.ggml.token_type", Value::i32_array(v.token_types));
  w.set("tokenizer.ggml.bos_token_id", Value::u32(v.bos_id));
  w.set("tokenizer.ggml.eos_token_id", Value::u32(v.eos_id));
  w.set("tokenizer.ggml.unknown_token_id", Value::u32(v.unk_id));
  w.set("tokenizer.ggml.padding_token_id", Value::u32(v.pad_id));
  w.set("tokenizer.ggml.add_bos_token", Value::boolean(true));
  w.set("tokenizer.ggml.add_eos_token", Value::boolean(false));
}

// Standard deviation of each tensor's values (see the header comment).
float role_std(TensorRole role, const std::vector<uint64_t>& shape, const HParams& hp) {
  switch (role) {
    case TensorRole::token_embd: case TensorRole::output:
      return 4.0f / std::sqrt(float(hp.n_embd));  // logits ~ N(0, 4^2): spread, not uniform
    default:
      return 1.0f / std::sqrt(float(shape[0]));  // preserves activation variance
  }
}

struct PlannedTensor {
  size_t index;  // in the writer
  TensorRole role;
  GgmlType type;
  std::vector<uint64_t> ne;
  float std;
};

struct Chunk {
  size_t tensor;     // into the planned list
  uint64_t row0, rows;
};

}  // namespace

std::vector<std::string> synth_mix_names() { return quant_mix_names(); }

Status apply_preset(SynthOptions& opts) {
  for (const auto& p : presets()) {
    if (p.name == opts.preset && p.arch == opts.arch) {
      opts.hp = p.hp;
      return {};
    }
  }
  std::string have;
  for (const auto& p : presets())
    if (p.arch == opts.arch) have += (have.empty() ? "" : ", ") + std::string(p.name);
  return Status::error("no preset '{}' for {} (have: {})", opts.preset, arch_name(opts.arch), have);
}

Status validate(const HParams& hp, Arch arch) {
  const struct { const char* name; uint32_t v; } dims[] = {
      {"n_vocab", hp.n_vocab}, {"n_embd", hp.n_embd}, {"n_layer", hp.n_layer}, {"n_head", hp.n_head},
      {"n_head_kv", hp.n_head_kv}, {"head_dim", hp.n_embd_head}, {"n_ff", hp.n_ff},
      {"n_ctx", hp.n_ctx_train}};
  for (const auto& d : dims)
    if (d.v == 0) return Status::error("{} must be positive", d.name);
  if (hp.n_head % hp.n_head_kv != 0)
    return Status::error("n_head {} is not a multiple of n_head_kv {}", hp.n_head, hp.n_head_kv);
  if (hp.n_vocab < kSynthMinVocab)
    return Status::error("n_vocab {} is below the generated tokenizer's minimum {}", hp.n_vocab, kSynthMinVocab);
  if (hp.n_embd % 32 || hp.n_ff % 32 || hp.n_embd_head % 32 || (hp.n_head * hp.n_embd_head) % 32)
    return Status::error("n_embd, n_ff, head_dim and n_head*head_dim must be multiples of 32 (quant blocks)");
  if (arch == Arch::gemma3 && (hp.swa_pattern == 0 || hp.n_swa == 0))
    return Status::error("gemma3 needs a sliding window and a layer pattern");
  return {};
}

GgmlType synth_tensor_type(const SynthOptions& opts, TensorRole role, int layer) {
  return mix_tensor_type(opts.mix, opts.type, role, layer, opts.hp, role_shape(role, opts.hp)[0]);
}

Result<std::vector<SynthTensor>> synth_tensors(const SynthOptions& o) {
  STRATA_TRY(validate(o.hp, o.arch));
  if (!o.mix.empty()) {
    const auto names = synth_mix_names();
    if (std::find(names.begin(), names.end(), o.mix) == names.end())
      return Status::error("unknown mix '{}' (have: {})", o.mix, fmt::join(names, ", "));
  }
  std::vector<SynthTensor> out;
  const auto roles = arch_roles(o.arch, o.hp);
  auto add = [&](TensorRole role, int layer) {
    const GgmlType type = synth_tensor_type(o, role, layer);
    if (!kernels::cpu::quant_kernels(type))
      return Status::error("type {} has no CPU kernels to generate it", ggml_type_info(type).name);
    out.push_back({tensor_name(role, layer), role, layer, type, role_shape(role, o.hp)});
    return Status::ok();
  };
  for (TensorRole r : roles)
    if (!role_info(r).per_layer) STRATA_TRY(add(r, -1));
  for (uint32_t il = 0; il < o.hp.n_layer; ++il)
    for (TensorRole r : roles)
      if (role_info(r).per_layer) STRATA_TRY(add(r, int(il)));
  return out;
}

Result<SynthSummary> write_synthetic_model(const SynthOptions& o, const std::string& path) {
  const auto t0 = std::chrono::steady_clock::now();
  auto table = synth_tensors(o);
  if (!table) return table.status();
  gguf::Writer w;
  write_metadata(w, o);
  std::vector<PlannedTensor> planned;
  for (const auto& t : *table)
    planned.push_back({w.add_tensor(t.name, t.type, t.ne), t.role, t.type, t.ne, role_std(t.role, t.ne, o.hp)});

  SynthSummary sum;
  sum.file_bytes = w.total_bytes();
  sum.n_tensors = planned.size();
  if (o.header_only) {
    STRATA_TRY(w.write_header_only(path));
    for (const auto& t : planned) sum.n_params += t.ne.size() > 1 ? t.ne[0] * t.ne[1] : t.ne[0];
    sum.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return sum;
  }

  // Chunks of ~4 MiB of rows: bounded memory per worker, enough parallelism for 16 cores.
  constexpr uint64_t kChunkBytes = 4ull << 20;
  std::vector<Chunk> chunks;
  uint64_t n_params = 0;
  for (size_t i = 0; i < planned.size(); ++i) {
    const auto& t = planned[i];
    const uint64_t row_bytes = ggml_row_bytes(t.type, t.ne[0]);
    const uint64_t rows = w.tensor_bytes(t.index) / row_bytes;
    const uint64_t per = std::max<uint64_t>(1, kChunkBytes / row_bytes);
    for (uint64_t r = 0; r < rows; r += per) chunks.push_back({i, r, std::min(per, rows - r)});
    n_params += rows * t.ne[0];
  }

  Progress progress(fmt::format("synth {}", path), w.total_bytes(), "B", o.progress);
  STRATA_TRY(write_gguf_in_pieces(w, path, chunks.size(), o.threads, progress, [&](size_t ci) -> Result<uint64_t> {
    const Chunk& c = chunks[ci];
    const PlannedTensor& t = planned[c.tensor];
    const uint64_t row_bytes = ggml_row_bytes(t.type, t.ne[0]);
    std::vector<uint8_t> buf(c.rows * row_bytes);
    const auto* k = kernels::cpu::quant_kernels(t.type);
    Rng rng(o.seed, (uint64_t(c.tensor) << 32) | (c.row0 & 0xffffffffu));
    if (role_info(t.role).is_norm) {
      // Norm weights near 1 (gemma3 GGUFs store 1 + w already, so ~1 is right there too).
      auto* f = reinterpret_cast<float*>(buf.data());
      for (uint64_t i = 0; i < c.rows * t.ne[0]; ++i) f[i] = rng.uniform(0.8f, 1.2f);
    } else {
      k->fill_random(buf.data(), int64_t(c.rows * t.ne[0]), rng, t.std);
    }
    STRATA_TRY(w.write_tensor_range(t.index, c.row0 * row_bytes, buf.data(), buf.size()));
    return uint64_t(buf.size());
  }));

  sum.n_params = n_params;
  sum.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return sum;
}

}  // namespace strata::model
