#include "model/hf_import.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "core/half.h"
#include "core/progress.h"
#include "kernels/cpu/quant_kernels.h"
#include "model/gguf_parallel_write.h"
#include "model/hf_export.h"
#include "model/hparams_metadata.h"

namespace strata::model {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

Result<json> read_json(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return Status::error("{}: cannot open", path.string());
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    return Status::error("{}: invalid JSON: {}", path.string(), e.what());
  }
}

struct StEntry {
  GgmlType dtype;
  std::vector<uint64_t> shape;  // torch order
  const uint8_t* data;
};

// One safetensors file: u64 LE header length N, N bytes of JSON {name: {dtype, shape,
// data_offsets: [begin, end)}}, then the data those offsets index.
Status read_safetensors(const std::shared_ptr<io::MappedFile>& file, std::map<std::string, StEntry>& out) {
  const auto bytes = file->bytes();
  const std::string& path = file->path();
  if (bytes.size() < 8) return Status::error("{}: too short for a safetensors file", path);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(bytes[i]) << (8 * i);
  if (n > bytes.size() - 8) return Status::error("{}: header length {} runs past the end of the file", path, n);
  const uint64_t data_start = 8 + n;
  const uint64_t data_size = bytes.size() - data_start;
  json h;
  try {
    h = json::parse(bytes.begin() + 8, bytes.begin() + int64_t(data_start));
  } catch (const json::exception& e) {
    return Status::error("{}: header is not JSON: {}", path, e.what());
  }
  if (!h.is_object()) return Status::error("{}: header is not a JSON object", path);
  for (const auto& [name, v] : h.items()) {
    if (name == "__metadata__") continue;
    try {
      const std::string dt = v.at("dtype").get<std::string>();
      StEntry e;
      uint64_t elem = 0;
      if (dt == "F32") e.dtype = GgmlType::F32, elem = 4;
      else if (dt == "F16") e.dtype = GgmlType::F16, elem = 2;
      else if (dt == "BF16") e.dtype = GgmlType::BF16, elem = 2;
      else return Status::error("{}: tensor '{}' has dtype {} (convert reads F32, F16, BF16)", path, name, dt);
      e.shape = v.at("shape").get<std::vector<uint64_t>>();
      const uint64_t b = v.at("data_offsets").at(0).get<uint64_t>(), end = v.at("data_offsets").at(1).get<uint64_t>();
      uint64_t count = 1;
      for (uint64_t d : e.shape) {
        if (d && count > (uint64_t(1) << 48) / d) return Status::error("{}: tensor '{}' is implausibly large", path, name);
        count *= d;
      }
      if (b > end || end > data_size || end - b != count * elem)
        return Status::error("{}: tensor '{}' has data_offsets [{}, {}) that do not fit its shape and the file ({} data "
                             "bytes)", path, name, b, end, data_size);
      e.data = bytes.data() + data_start + b;
      if (!out.emplace(name, e).second) return Status::error("{}: tensor '{}' appears twice", path, name);
    } catch (const json::exception& ex) {
      return Status::error("{}: tensor '{}': {}", path, name, ex.what());
    }
  }
  return {};
}

template <typename T>
T get_or(const json& c, const char* key, T fallback) {
  auto it = c.find(key);
  if (it == c.end() || it->is_null()) return fallback;
  return it->get<T>();
}

// The RoPE entry for a layer type: transformers 5.x rope_parameters (flat, or per layer type),
// else the legacy rope_theta / rope_scaling.
struct Rope {
  float theta;
  float linear = 1.0f;
};
Result<Rope> read_rope(const json& c, const char* layer_type, float default_theta, const char* legacy_theta_key) {
  Rope r{get_or<float>(c, legacy_theta_key, default_theta)};
  json scaling = c.value("rope_scaling", json());
  if (c.contains("rope_parameters") && c["rope_parameters"].is_object()) {
    json p = c["rope_parameters"];
    if (layer_type && p.contains(layer_type)) p = p[layer_type];
    if (p.contains("rope_theta")) r.theta = p["rope_theta"].get<float>();
    scaling = p;
  }
  if (scaling.is_object()) {
    const std::string type = scaling.value("rope_type", scaling.value("type", std::string("default")));
    if (type == "linear") r.linear = scaling.value("factor", 1.0f);
    else if (type != "default")
      return Status::error("RoPE scaling '{}' is not supported by strata (default, linear)", type);
  }
  if (!(r.theta > 0) || !(r.linear > 0)) return Status::error("RoPE theta and factor must be positive");
  return r;
}

Status refuse_if(bool cond, const std::string& what) { return cond ? Status::error("{}", what) : Status::ok(); }

Status read_config(const json& c, HfModel& m) {
  const std::string type = c.value("model_type", std::string());
  if (type == "gemma3_text") m.arch = Arch::gemma3;
  else if (type == "llama" || type == "mistral") m.arch = Arch::llama;
  else if (type == "qwen3") m.arch = Arch::qwen3;
  else if (type == "gemma3")
    return Status::error("model_type 'gemma3' is the multimodal checkpoint; convert reads the text model "
                         "(model_type gemma3_text)");
  else
    return Status::error("model_type '{}' is not supported (gemma3_text, llama, mistral, qwen3)", type);
  HParams& hp = m.hp;
  hp.n_vocab = c.at("vocab_size").get<uint32_t>();
  hp.n_embd = c.at("hidden_size").get<uint32_t>();
  hp.n_ff = c.at("intermediate_size").get<uint32_t>();
  hp.n_layer = c.at("num_hidden_layers").get<uint32_t>();
  hp.n_head = c.at("num_attention_heads").get<uint32_t>();
  hp.n_head_kv = get_or<uint32_t>(c, "num_key_value_heads", hp.n_head);
  if (!hp.n_head || !hp.n_head_kv || !hp.n_embd || !hp.n_layer || !hp.n_ff || !hp.n_vocab)
    return Status::error("a model dimension is zero");
  if (hp.n_head % hp.n_head_kv) return Status::error("num_attention_heads is not a multiple of num_key_value_heads");
  hp.n_embd_head = get_or<uint32_t>(c, "head_dim", hp.n_embd / hp.n_head);
  hp.n_ctx_train = get_or<uint32_t>(c, "max_position_embeddings", 2048);
  hp.rms_eps = get_or<float>(c, "rms_norm_eps", 1e-6f);
  const bool default_tied = m.arch == Arch::gemma3;
  hp.tied_output = get_or<bool>(c, "tie_word_embeddings", default_tied);
  STRATA_TRY(refuse_if(get_or<bool>(c, "attention_bias", false), "attention_bias: true is not supported"));
  STRATA_TRY(refuse_if(get_or<bool>(c, "mlp_bias", false), "mlp_bias: true is not supported"));

  if (m.arch == Arch::gemma3) {
    STRATA_TRY(refuse_if(!c.value("final_logit_softcapping", json()).is_null() ||
                             !c.value("attn_logit_softcapping", json()).is_null(),
                         "final_logit_softcapping / attn_logit_softcapping are set: strata's gemma3 has no softcaps"));
    const std::string act = c.value("hidden_activation", c.value("hidden_act", std::string("gelu_pytorch_tanh")));
    STRATA_TRY(refuse_if(act != "gelu_pytorch_tanh", "hidden_activation '" + act + "': strata's gemma3 uses gelu_pytorch_tanh"));
    auto global = read_rope(c, "full_attention", 1e6f, "rope_theta");
    if (!global) return global.status();
    auto local = read_rope(c, "sliding_attention", get_or<float>(c, "rope_local_base_freq", 1e4f), "rope_local_base_freq");
    if (!local) return local.status();
    STRATA_TRY(refuse_if(local->linear != 1.0f, "RoPE scaling on sliding layers is not supported"));
    hp.rope_freq_base = global->theta;
    hp.rope_scale_linear = global->linear;
    hp.rope_freq_base_swa = local->theta;
    hp.n_swa = get_or<uint32_t>(c, "sliding_window", 4096);
    hp.swa_pattern = get_or<uint32_t>(c, "sliding_window_pattern", 6);
    if (c.contains("layer_types") && c["layer_types"].is_array()) {
      // strata (and GGUF) express the layer types as a period: layer il is global iff
      // il % pattern == pattern - 1. Find it from the first global layer, then check every layer.
      const auto types = c["layer_types"].get<std::vector<std::string>>();
      if (types.size() != hp.n_layer) return Status::error("layer_types has {} entries for {} layers", types.size(), hp.n_layer);
      uint32_t first_global = hp.n_layer;
      for (uint32_t il = 0; il < hp.n_layer; ++il)
        if (types[il] == "full_attention") { first_global = il; break; }
      hp.swa_pattern = first_global + 1;  // all sliding: any period longer than n_layer
      for (uint32_t il = 0; il < hp.n_layer; ++il) {
        const bool global = il % hp.swa_pattern == hp.swa_pattern - 1;
        if (types[il] != (global ? "full_attention" : "sliding_attention"))
          return Status::error("layer_types: layer {} is '{}', which no period of global layers explains", il, types[il]);
      }
    }
    // strata derives the attention scale: 1/sqrt(head_dim), or n_embd / n_head for 62 layers (27B).
    const float derived = hp.n_layer == 62 ? float(hp.n_embd) / float(hp.n_head) : float(hp.n_embd_head);
    const float qpas = get_or<float>(c, "query_pre_attn_scalar", derived);
    STRATA_TRY(refuse_if(qpas != derived, fmt::format("query_pre_attn_scalar {} differs from the {} that strata (and the "
                                                      "GGUF format) derive for this shape", qpas, derived)));
    hp.query_pre_attn_scalar = derived;
  } else {
    const std::string act = c.value("hidden_act", std::string("silu"));
    STRATA_TRY(refuse_if(act != "silu", "hidden_act '" + act + "' is not supported (silu)"));
    auto rope = read_rope(c, nullptr, m.arch == Arch::qwen3 ? 1e6f : 1e4f, "rope_theta");
    if (!rope) return rope.status();
    hp.rope_freq_base = rope->theta;
    hp.rope_scale_linear = rope->linear;
    if (m.arch == Arch::llama) hp.n_swa = get_or<uint32_t>(c, "sliding_window", 0);
    else STRATA_TRY(refuse_if(get_or<bool>(c, "use_sliding_window", false), "use_sliding_window: true is not supported"));
  }
  return {};
}

Result<std::vector<std::string>> shard_files(const fs::path& dir) {
  if (fs::exists(dir / "model.safetensors")) return std::vector<std::string>{"model.safetensors"};
  const fs::path index = dir / "model.safetensors.index.json";
  if (!fs::exists(index))
    return Status::error("{}: neither model.safetensors nor model.safetensors.index.json is there", dir.string());
  auto j = read_json(index);
  if (!j) return j.status();
  std::vector<std::string> files;
  try {
    for (const auto& [name, file] : j->at("weight_map").items()) {
      const std::string f = file.get<std::string>();
      if (f.find('/') != std::string::npos) return Status::error("{}: shard '{}' is outside the folder", index.string(), f);
      if (std::find(files.begin(), files.end(), f) == files.end()) files.push_back(f);
    }
  } catch (const json::exception& e) {
    return Status::error("{}: {}", index.string(), e.what());
  }
  std::sort(files.begin(), files.end());
  return files;
}

void to_f32(GgmlType t, const uint8_t* src, float* dst, uint64_t n) {
  if (t == GgmlType::F32) {
    std::memcpy(dst, src, n * 4);
    return;
  }
  for (uint64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);
    dst[i] = t == GgmlType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
  }
}

}  // namespace

Result<HfModel> open_hf_model(const std::string& dir_str) {
  const fs::path dir(dir_str);
  if (!fs::is_directory(dir)) return Status::error("{}: not a folder (convert takes a Hugging Face model folder)", dir_str);
  HfModel m;
  m.dir = dir_str;
  m.name = fs::absolute(dir).lexically_normal().filename().string();
  if (m.name.empty()) m.name = fs::absolute(dir).lexically_normal().parent_path().filename().string();
  auto config = read_json(dir / "config.json");
  if (!config) return config.status();
  try {
    STRATA_TRY(read_config(*config, m).with_context((dir / "config.json").string()));
  } catch (const json::exception& e) {
    return Status::error("{}: {}", (dir / "config.json").string(), e.what());
  }

  auto files = shard_files(dir);
  if (!files) return files.status();
  std::map<std::string, StEntry> entries;
  for (const auto& f : *files) {
    auto mapped = io::MappedFile::open((dir / f).string());
    if (!mapped) return mapped.status();
    STRATA_TRY(read_safetensors(*mapped, entries));
    m.shards.push_back(*mapped);
  }

  size_t used = 0;
  auto add = [&](TensorRole role, int il) -> Status {
    const std::string name = hf_tensor_name(m.arch, role, il);
    auto it = entries.find(name);
    if (it == entries.end()) return Status::error("{}: tensor '{}' is missing", dir_str, name);
    const auto want = role_shape(role, m.hp);
    const std::vector<uint64_t> torch_shape(want.rbegin(), want.rend());
    if (it->second.shape != torch_shape)
      return Status::error("{}: tensor '{}' has shape {}, expected {} from config.json", dir_str, name,
                           fmt::format("[{}]", fmt::join(it->second.shape, ", ")),
                           fmt::format("[{}]", fmt::join(torch_shape, ", ")));
    m.tensors.push_back({name, role, il, it->second.dtype, want, it->second.data});
    ++used;
    return {};
  };
  const auto roles = arch_roles(m.arch, m.hp);
  for (TensorRole r : roles)
    if (!role_info(r).per_layer) STRATA_TRY(add(r, -1));
  for (uint32_t il = 0; il < m.hp.n_layer; ++il)
    for (TensorRole r : roles)
      if (role_info(r).per_layer) STRATA_TRY(add(r, int(il)));
  m.n_unused = uint32_t(entries.size() - used);
  return m;
}

void set_hf_metadata(const HfModel& m, GgmlType outtype, gguf::Writer& w) {
  using gguf::Value;
  set_hparams_metadata(w, m.arch, m.hp);
  w.set("general.name", Value::string(m.name));
  w.set("general.file_type", Value::u32(outtype == GgmlType::F32 ? 0 : outtype == GgmlType::F16 ? 1 : 32));
}

Result<uint64_t> write_hf_tensors(const HfModel& m, const HfImportOptions& o, gguf::Writer& w,
                                  const std::string& out_path) {
  STRATA_CHECK(o.outtype == GgmlType::F32 || o.outtype == GgmlType::F16 || o.outtype == GgmlType::BF16,
               "outtype is validated by the caller");
  std::vector<size_t> index;
  std::vector<GgmlType> types;
  uint64_t total = 0;
  for (const auto& t : m.tensors) {
    const GgmlType type = role_info(t.role).is_norm ? GgmlType::F32 : o.outtype;
    types.push_back(type);
    index.push_back(w.add_tensor(tensor_name(t.role, t.layer), type, t.ne));
    total += w.tensor_bytes(index.back());
  }
  Progress progress(fmt::format("convert {} -> {}", m.dir, out_path), total, "B", o.progress);
  STRATA_TRY(write_gguf_in_pieces(w, out_path, m.tensors.size(), o.threads, progress, [&](size_t i) -> Result<uint64_t> {
    const HfSourceTensor& t = m.tensors[i];
    const uint64_t row = t.ne[0], rows = t.ne.size() > 1 ? t.ne[1] : 1, n = row * rows;
    std::vector<float> f(n);
    to_f32(t.dtype, t.data, f.data(), n);
    if (m.arch == Arch::gemma3 && role_info(t.role).is_norm)
      for (float& x : f) x += 1.0f;  // HF: x * (1 + w); GGUF stores w + 1
    if (m.arch == Arch::llama && (t.role == TensorRole::attn_q || t.role == TensorRole::attn_k)) {
      std::vector<float> p(n);
      const uint32_t heads = t.role == TensorRole::attn_q ? m.hp.n_head : m.hp.n_head_kv;
      permute_rope_rows(f.data(), p.data(), heads, m.hp.n_embd_head, row);
      f.swap(p);
    }
    std::vector<uint8_t> out(ggml_row_bytes(types[i], row) * rows);
    kernels::cpu::quant_kernels(types[i])->quantize(f.data(), out.data(), int64_t(n));
    STRATA_TRY(w.write_tensor(index[i], out.data(), out.size()));
    return uint64_t(out.size());
  }));
  return w.total_bytes();
}

}  // namespace strata::model
