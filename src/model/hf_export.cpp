#include "model/hf_export.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kernels/cpu/quant_kernels.h"
#include "model/arch.h"

namespace strata::model {
namespace {

using ojson = nlohmann::ordered_json;

}  // namespace

std::string hf_tensor_name(Arch arch, TensorRole role, int il) {
  using R = TensorRole;
  const std::string l = fmt::format("model.layers.{}.", il);
  switch (role) {
    case R::token_embd: return "model.embed_tokens.weight";
    case R::output_norm: return "model.norm.weight";
    case R::output: return "lm_head.weight";
    case R::attn_norm: return l + "input_layernorm.weight";
    case R::attn_q: return l + "self_attn.q_proj.weight";
    case R::attn_k: return l + "self_attn.k_proj.weight";
    case R::attn_v: return l + "self_attn.v_proj.weight";
    case R::attn_output: return l + "self_attn.o_proj.weight";
    case R::attn_q_norm: return l + "self_attn.q_norm.weight";
    case R::attn_k_norm: return l + "self_attn.k_norm.weight";
    case R::post_attention_norm: return l + "post_attention_layernorm.weight";
    // gemma3 has four norms per layer: its FFN norm is HF's pre_feedforward_layernorm; llama and
    // qwen3 call their (only) FFN norm post_attention_layernorm.
    case R::ffn_norm: return l + (arch == Arch::gemma3 ? "pre_feedforward_layernorm.weight" : "post_attention_layernorm.weight");
    case R::ffn_gate: return l + "mlp.gate_proj.weight";
    case R::ffn_up: return l + "mlp.up_proj.weight";
    case R::ffn_down: return l + "mlp.down_proj.weight";
    case R::post_ffw_norm: return l + "post_feedforward_layernorm.weight";
  }
  return "";
}

namespace {

std::vector<uint64_t> strip_trailing_ones(std::vector<uint64_t> ne, size_t keep) {
  while (ne.size() > keep && ne.back() == 1) ne.pop_back();
  return ne;
}

// Safetensors: u64 LE header length, JSON header (padded with spaces to 8 bytes), raw data.
std::string safetensors_header(const std::vector<HfTensor>& tensors) {
  ojson h;
  h["__metadata__"] = {{"format", "pt"}, {"producer", "strata export-hf"}};
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    uint64_t n = 1;
    for (uint64_t d : t.shape) n *= d;
    h[t.hf_name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + n * 4}}};
    offset += n * 4;
  }
  std::string s = h.dump();
  while (s.size() % 8) s.push_back(' ');
  return s;
}

// An owning FILE* that reports errno context.
struct FileCloser {
  void operator()(std::FILE* f) const { if (f) std::fclose(f); }
};
using FilePtr = std::unique_ptr<std::FILE, FileCloser>;

Status write_all(std::FILE* f, const void* data, size_t n, const std::string& path) {
  if (n && std::fwrite(data, 1, n, f) != n)
    return Status::error("{}: write failed: {}", path, std::strerror(errno));
  return {};
}

Status write_text_file(const std::string& path, const std::string& text) {
  FilePtr f(std::fopen(path.c_str(), "wb"));
  if (!f) return Status::error("{}: cannot create: {}", path, std::strerror(errno));
  STRATA_TRY(write_all(f.get(), text.data(), text.size(), path));
  if (std::fclose(f.release()) != 0) return Status::error("{}: close failed: {}", path, std::strerror(errno));
  return {};
}

// Rows of one tensor decoded to f32 and transformed, chunk by chunk.
Status write_tensor(std::FILE* out, const std::string& out_path, const HfTensor& t, uint32_t head_dim) {
  const gguf::TensorInfo& src = *t.src;
  const auto* qk = kernels::cpu::quant_kernels(src.type);
  STRATA_CHECK(qk && qk->dequantize, "plan admitted a type without dequantize");
  const uint64_t row_len = src.ne[0];
  const uint64_t n_rows = src.rows();
  const uint64_t row_bytes = ggml_row_bytes(src.type, row_len);
  // Chunks of ~4M floats, a whole number of heads for the RoPE un-permutation.
  const uint64_t unit = t.transform == HfTransform::unpermute_rope ? head_dim : 1;
  uint64_t chunk_rows = std::max<uint64_t>(unit, ((uint64_t(4) << 20) / std::max<uint64_t>(row_len, 1)) / unit * unit);
  std::vector<float> buf(chunk_rows * row_len), tmp;
  if (t.transform == HfTransform::unpermute_rope) tmp.resize(buf.size());
  for (uint64_t r0 = 0; r0 < n_rows; r0 += chunk_rows) {
    const uint64_t nr = std::min(chunk_rows, n_rows - r0);
    const uint8_t* p = src.data + r0 * row_bytes;
    for (uint64_t r = 0; r < nr; ++r) qk->dequantize(p + r * row_bytes, buf.data() + r * row_len, int64_t(row_len));
    const float* data = buf.data();
    switch (t.transform) {
      case HfTransform::none: break;
      case HfTransform::norm_minus_one:
        for (uint64_t i = 0; i < nr * row_len; ++i) buf[i] -= 1.0f;
        break;
      case HfTransform::unpermute_rope:
        STRATA_CHECK(nr % head_dim == 0, "chunk is not a whole number of heads");
        unpermute_rope_rows(buf.data(), tmp.data(), uint32_t(nr / head_dim), head_dim, row_len);
        data = tmp.data();
        break;
    }
    STRATA_TRY(write_all(out, data, nr * row_len * sizeof(float), out_path));
  }
  return {};
}

std::optional<uint64_t> token_id(const gguf::File& f, const char* key) {
  auto v = f.get_uint(std::string("tokenizer.ggml.") + key);
  if (!v) return std::nullopt;
  return *v;
}

}  // namespace

void unpermute_rope_rows(const float* src, float* dst, uint32_t n_head, uint32_t head_dim, uint64_t row_len) {
  STRATA_CHECK(head_dim % 2 == 0, "head_dim {} is odd", head_dim);
  const uint32_t half = head_dim / 2;
  for (uint32_t h = 0; h < n_head; ++h)
    for (uint32_t i = 0; i < half; ++i)
      for (uint32_t j = 0; j < 2; ++j) {
        const uint64_t g = uint64_t(h) * head_dim + 2 * i + j;     // GGUF row
        const uint64_t o = uint64_t(h) * head_dim + j * half + i;  // HF row
        std::memcpy(dst + o * row_len, src + g * row_len, row_len * sizeof(float));
      }
}

void permute_rope_rows(const float* src, float* dst, uint32_t n_head, uint32_t head_dim, uint64_t row_len) {
  STRATA_CHECK(head_dim % 2 == 0, "head_dim {} is odd", head_dim);
  const uint32_t half = head_dim / 2;
  for (uint32_t h = 0; h < n_head; ++h)
    for (uint32_t i = 0; i < half; ++i)
      for (uint32_t j = 0; j < 2; ++j) {
        const uint64_t g = uint64_t(h) * head_dim + 2 * i + j;
        const uint64_t o = uint64_t(h) * head_dim + j * half + i;
        std::memcpy(dst + g * row_len, src + o * row_len, row_len * sizeof(float));
      }
}

Result<std::vector<HfTensor>> hf_tensor_plan(const gguf::File& file, const ModelSpec& spec) {
  const HParams& hp = spec.hp;
  if (spec.arch == Arch::llama && file.find_tensor("rope_freqs.weight"))
    return Status::error("{}: rope_freqs.weight (llama3 RoPE scaling) cannot be exported: HF needs the llama3 "
                         "scaling parameters, which the GGUF does not store", file.path());
  std::vector<HfTensor> out;
  const auto roles = arch_roles(spec.arch, hp);
  auto add = [&](TensorRole role, int il) -> Status {
    const std::string gname = tensor_name(role, il);
    const gguf::TensorInfo* t = file.find_tensor(gname);
    if (!t) return Status::error("{}: missing tensor '{}'", file.path(), gname);
    const auto want = role_shape(role, hp);
    if (strip_trailing_ones(t->ne, want.size()) != want) {
      gguf::TensorInfo w;
      w.ne = want;
      return Status::error("{}: tensor '{}' has shape {}, expected {}", file.path(), gname, t->shape_string(),
                           w.shape_string());
    }
    if (!t->data) return Status::error("{}: tensor '{}' has no data in the file (header-only or truncated)", file.path(), gname);
    const auto* qk = kernels::cpu::quant_kernels(t->type);
    if (!qk || !qk->dequantize)
      return Status::error("{}: tensor '{}' has type {}, which strata cannot dequantise", file.path(), gname,
                           ggml_type_info(t->type).name);
    HfTensor h;
    h.hf_name = hf_tensor_name(spec.arch, role, il);
    h.src = t;
    h.shape.assign(want.rbegin(), want.rend());  // ggml [n_in, n_out] -> torch [n_out, n_in]
    if (spec.arch == Arch::gemma3 && role_info(role).is_norm) h.transform = HfTransform::norm_minus_one;
    if (spec.arch == Arch::llama && (role == TensorRole::attn_q || role == TensorRole::attn_k)) {
      h.transform = HfTransform::unpermute_rope;
      h.n_head = role == TensorRole::attn_q ? hp.n_head : hp.n_head_kv;
    }
    out.push_back(std::move(h));
    return {};
  };
  for (TensorRole role : roles)
    if (!role_info(role).per_layer) STRATA_TRY(add(role, -1));
  for (uint32_t il = 0; il < hp.n_layer; ++il)
    for (TensorRole role : roles)
      if (role_info(role).per_layer) STRATA_TRY(add(role, int(il)));
  return out;
}

Result<std::string> hf_config_json(const gguf::File& file, const ModelSpec& spec) {
  const HParams& hp = spec.hp;
  ojson c;
  auto rope = [](float theta, float linear) {
    ojson r;
    r["rope_type"] = linear != 1.0f ? "linear" : "default";
    if (linear != 1.0f) r["factor"] = double(linear);
    r["rope_theta"] = double(theta);
    return r;
  };
  switch (spec.arch) {
    case Arch::gemma3: c["architectures"] = {"Gemma3ForCausalLM"}; c["model_type"] = "gemma3_text"; break;
    case Arch::llama:
      // A llama GGUF with a sliding window is Mistral-style: every layer slides.
      if (hp.n_swa) { c["architectures"] = {"MistralForCausalLM"}; c["model_type"] = "mistral"; }
      else { c["architectures"] = {"LlamaForCausalLM"}; c["model_type"] = "llama"; }
      break;
    case Arch::qwen3: c["architectures"] = {"Qwen3ForCausalLM"}; c["model_type"] = "qwen3"; break;
  }
  c["vocab_size"] = hp.n_vocab;
  c["hidden_size"] = hp.n_embd;
  c["intermediate_size"] = hp.n_ff;
  c["num_hidden_layers"] = hp.n_layer;
  c["num_attention_heads"] = hp.n_head;
  c["num_key_value_heads"] = hp.n_head_kv;
  c["head_dim"] = hp.n_embd_head;
  c["max_position_embeddings"] = hp.n_ctx_train;
  c["rms_norm_eps"] = double(hp.rms_eps);
  c["tie_word_embeddings"] = hp.tied_output;
  c["attention_bias"] = false;
  c["attention_dropout"] = 0.0;
  c["use_cache"] = true;
  c["initializer_range"] = 0.02;
  for (const char* key : {"bos_token_id", "eos_token_id"}) {
    auto id = token_id(file, key);
    c[key] = id ? ojson(*id) : ojson(nullptr);
  }
  if (auto id = token_id(file, "padding_token_id")) c["pad_token_id"] = *id;
  c["torch_dtype"] = "float32";  // 4.x name
  c["dtype"] = "float32";        // 5.x name

  std::vector<std::string> layer_types;
  for (uint32_t il = 0; il < hp.n_layer; ++il)
    layer_types.push_back(spec.is_swa(il) ? "sliding_attention" : "full_attention");

  if (spec.arch == Arch::gemma3) {
    c["hidden_activation"] = "gelu_pytorch_tanh";
    // transformers 5.x validates this field as an int (it is n_embd / n_head or head_dim).
    if (hp.query_pre_attn_scalar == std::floor(hp.query_pre_attn_scalar))
      c["query_pre_attn_scalar"] = int64_t(hp.query_pre_attn_scalar);
    else
      c["query_pre_attn_scalar"] = double(hp.query_pre_attn_scalar);
    c["sliding_window"] = hp.n_swa;
    c["layer_types"] = layer_types;
    c["sliding_window_pattern"] = hp.swa_pattern;  // 4.5x reads this when layer_types is absent
    c["final_logit_softcapping"] = nullptr;
    c["attn_logit_softcapping"] = nullptr;
    // 5.x: one RoPE per layer type (global layers: freq_base + linear scaling; sliding: freq_base_swa).
    // The legacy flat `rope_scaling` is left out on purpose: in 5.x a non-null rope_scaling replaces
    // (or is merged into) rope_parameters depending on the version, and could put the global
    // layers' scaling on the sliding ones. rope_theta / rope_local_base_freq agree with it.
    c["rope_parameters"] = {{"full_attention", rope(hp.rope_freq_base, hp.rope_scale_linear)},
                            {"sliding_attention", rope(hp.rope_freq_base_swa, 1.0f)}};
    c["rope_theta"] = double(hp.rope_freq_base);
    c["rope_local_base_freq"] = double(hp.rope_freq_base_swa);
  } else {
    c["hidden_act"] = "silu";
    c["rope_parameters"] = rope(hp.rope_freq_base, hp.rope_scale_linear);
    c["rope_theta"] = double(hp.rope_freq_base);
    // Non-null only for linear scaling, where it says the same as rope_parameters.
    c["rope_scaling"] = hp.rope_scale_linear != 1.0f
                            ? ojson{{"rope_type", "linear"}, {"factor", double(hp.rope_scale_linear)}}
                            : ojson(nullptr);
    if (spec.arch == Arch::llama) {
      c["mlp_bias"] = false;
      c["pretraining_tp"] = 1;
      if (hp.n_swa) c["sliding_window"] = hp.n_swa;
    } else {  // qwen3
      c["use_sliding_window"] = false;
      c["sliding_window"] = nullptr;
      c["max_window_layers"] = hp.n_layer;
      c["layer_types"] = layer_types;
    }
  }
  return c.dump(2) + "\n";
}

Status export_hf(const gguf::File& file, const ModelSpec& spec, const std::string& out_dir) {
  auto plan = hf_tensor_plan(file, spec);
  if (!plan) return plan.status();
  auto config = hf_config_json(file, spec);
  if (!config) return config.status();

  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) return Status::error("{}: cannot create the output folder: {}", out_dir, ec.message());
  if (!fs::is_directory(out_dir)) return Status::error("{}: exists and is not a folder", out_dir);

  const std::string st_path = (fs::path(out_dir) / "model.safetensors").string();
  const std::string partial = st_path + ".partial";
  {
    FilePtr f(std::fopen(partial.c_str(), "wb"));
    if (!f) return Status::error("{}: cannot create: {}", partial, std::strerror(errno));
    const std::string header = safetensors_header(*plan);
    uint8_t len[8];
    for (int i = 0; i < 8; ++i) len[i] = uint8_t(uint64_t(header.size()) >> (8 * i));
    STRATA_TRY(write_all(f.get(), len, 8, partial));
    STRATA_TRY(write_all(f.get(), header.data(), header.size(), partial));
    for (const auto& t : *plan) STRATA_TRY(write_tensor(f.get(), partial, t, spec.hp.n_embd_head));
    if (std::fclose(f.release()) != 0) return Status::error("{}: close failed: {}", partial, std::strerror(errno));
  }
  fs::rename(partial, st_path, ec);
  if (ec) return Status::error("{}: cannot rename to {}: {}", partial, st_path, ec.message());
  return write_text_file((fs::path(out_dir) / "config.json").string(), *config);
}

}  // namespace strata::model
