// strata inspect MODEL.gguf [--json] [--no-tensors]: what is in a GGUF file, from its header alone.
#include <map>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "core/log.h"
#include "core/units.h"
#include "model/gguf_file.h"

namespace strata::cli {
namespace {

struct InspectArgs {
  std::string model;
  bool json = false;
  bool no_tensors = false;
};

// "blk.12.attn_q.weight" -> 12; -1 for tensors outside the layers.
int layer_of(const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return -1;
  size_t end = name.find('.', 4);
  if (end == std::string::npos) return -1;
  try {
    return std::stoi(name.substr(4, end - 4));
  } catch (...) {
    return -1;
  }
}

// Which block of its layer a tensor belongs to, from its name.
const char* block_of(const std::string& name) {
  if (name.find(".attn_") != std::string::npos || name.find(".post_attention_norm") != std::string::npos)
    return "attention";
  if (name.find(".ffn_") != std::string::npos || name.find(".post_ffw_norm") != std::string::npos)
    return "ffn";
  return "other";
}

nlohmann::json value_json(const gguf::Value& v, bool full_arrays) {
  using gguf::ValueType;
  switch (v.type) {
    case ValueType::u8: case ValueType::u16: case ValueType::u32: case ValueType::u64:
      return std::get<uint64_t>(v.data);
    case ValueType::i8: case ValueType::i16: case ValueType::i32: case ValueType::i64:
      return std::get<int64_t>(v.data);
    case ValueType::f32: case ValueType::f64: return std::get<double>(v.data);
    case ValueType::boolean: return std::get<bool>(v.data);
    case ValueType::string: return std::get<std::string>(v.data);
    case ValueType::array: {
      const auto& a = std::get<gguf::Array>(v.data);
      if (!full_arrays && a.items.size() > 16)
        return {{"type", std::string(gguf::value_type_name(a.elem_type))}, {"count", a.items.size()}};
      nlohmann::json arr = nlohmann::json::array();
      for (const auto& item : a.items) arr.push_back(value_json(item, full_arrays));
      return arr;
    }
  }
  return nullptr;
}

struct Totals {
  struct Layer { uint64_t attention = 0, ffn = 0, other = 0; };
  std::map<int, Layer> layers;  // -1: outside layers
  struct Type { uint64_t tensors = 0, bytes = 0, params = 0; GgmlType type = GgmlType::F32; };
  std::map<std::string, Type> by_type;  // by type name
  uint64_t bytes = 0, params = 0;
};

Totals tally(const gguf::File& f) {
  Totals t;
  for (const auto& ti : f.tensors()) {
    auto& l = t.layers[layer_of(ti.name)];
    const std::string block = block_of(ti.name);
    (block == "attention" ? l.attention : block == "ffn" ? l.ffn : l.other) += ti.n_bytes;
    auto& bt = t.by_type[std::string(ggml_type_info(ti.type).name)];
    bt.tensors += 1;
    bt.bytes += ti.n_bytes;
    bt.params += ti.n_elements;
    bt.type = ti.type;
    t.bytes += ti.n_bytes;
    t.params += ti.n_elements;
  }
  return t;
}

nlohmann::json tokenizer_json(const gguf::File& f) {
  nlohmann::json j;
  if (!f.has("tokenizer.ggml.model")) return nullptr;
  j["model"] = f.get_string("tokenizer.ggml.model", "").value();
  if (auto tokens = f.get_array("tokenizer.ggml.tokens"); tokens) j["n_tokens"] = (*tokens)->items.size();
  if (auto merges = f.get_array("tokenizer.ggml.merges"); merges) j["n_merges"] = (*merges)->items.size();
  for (const char* key : {"bos_token_id", "eos_token_id", "unknown_token_id", "padding_token_id"}) {
    auto id = f.get_uint(std::string("tokenizer.ggml.") + key);
    if (id) j[key] = *id;
  }
  if (auto t = f.get_string("tokenizer.chat_template"); t) j["chat_template_bytes"] = t->size();
  return j;
}

int run_inspect(const InspectArgs& args) {
  auto file = gguf::File::open(args.model, {.require_data = false});
  if (!file) {
    log::error("{}", file.message());
    return 1;
  }
  const gguf::File& f = *file;
  const Totals totals = tally(f);
  const std::string arch = f.architecture();

  if (args.json) {
    nlohmann::json j;
    j["file"] = f.path();
    j["file_bytes"] = f.file_size();
    j["gguf_version"] = f.version();
    j["alignment"] = f.alignment();
    j["data_offset"] = f.data_offset();
    j["data_present"] = f.has_all_data();
    j["architecture"] = arch;
    nlohmann::json meta = nlohmann::json::object();
    for (const auto& [k, v] : f.metadata()) meta[k] = value_json(v, false);
    j["metadata"] = meta;
    j["tokenizer"] = tokenizer_json(f);
    if (!args.no_tensors) {
      nlohmann::json tensors = nlohmann::json::array();
      for (const auto& t : f.tensors())
        tensors.push_back({{"name", t.name}, {"type", std::string(ggml_type_info(t.type).name)},
                           {"shape", t.ne}, {"bytes", t.n_bytes}, {"offset", t.offset},
                           {"present", t.data != nullptr}});
      j["tensors"] = tensors;
    }
    nlohmann::json layers = nlohmann::json::array();
    for (const auto& [il, l] : totals.layers)
      if (il >= 0) layers.push_back({{"layer", il}, {"attention_bytes", l.attention}, {"ffn_bytes", l.ffn},
                                     {"other_bytes", l.other}});
    j["layers"] = layers;
    nlohmann::json types = nlohmann::json::object();
    for (const auto& [name, c] : totals.by_type)
      types[name] = {{"tensors", c.tensors}, {"bytes", c.bytes}, {"params", c.params},
                     {"bits_per_weight", c.params ? 8.0 * double(c.bytes) / double(c.params) : 0.0}};
    j["bytes_by_type"] = types;
    j["n_tensors"] = f.tensors().size();
    j["n_params"] = totals.params;
    j["tensor_bytes"] = totals.bytes;
    fmt::print("{}\n", j.dump(2));
    return 0;
  }

  fmt::print("file:          {} ({}, GGUF v{}, alignment {}, data at offset {})\n", f.path(),
             format_bytes(f.file_size()), f.version(), f.alignment(), f.data_offset());
  if (!f.has_all_data())
    fmt::print("note:          tensor data absent or incomplete (header only): the file has {} of the "
               "{} bytes its tensors need\n",
               format_bytes(f.file_size()), format_bytes(f.data_offset() + totals.bytes));
  fmt::print("architecture:  {}\n", arch.empty() ? "(none: general.architecture missing)" : arch);
  if (auto name = f.get_string("general.name", ""); name && !name->empty())
    fmt::print("name:          {}\n", *name);

  fmt::print("\nhyperparameters:\n");
  bool any = false;
  for (const auto& [k, v] : f.metadata()) {
    if (!arch.empty() && k.rfind(arch + ".", 0) == 0) {
      fmt::print("  {:<44} {}\n", k.substr(arch.size() + 1), v.to_display());
      any = true;
    }
  }
  if (!any) fmt::print("  (none)\n");

  fmt::print("\ntokenizer:\n");
  const auto tok = tokenizer_json(f);
  if (tok.is_null()) {
    fmt::print("  (none)\n");
  } else {
    fmt::print("  model {}, {} tokens", tok["model"].get<std::string>(), tok.value("n_tokens", 0));
    if (tok.contains("n_merges")) fmt::print(", {} merges", tok["n_merges"].get<uint64_t>());
    for (const char* key : {"bos_token_id", "eos_token_id"})
      if (tok.contains(key)) fmt::print(", {} {}", std::string(key).substr(0, 3), tok[key].get<uint64_t>());
    if (tok.contains("chat_template_bytes"))
      fmt::print(", chat template ({} bytes)", tok["chat_template_bytes"].get<uint64_t>());
    fmt::print("\n");
  }

  fmt::print("\nother metadata:\n");
  for (const auto& [k, v] : f.metadata())
    if ((arch.empty() || k.rfind(arch + ".", 0) != 0) && k.rfind("tokenizer.", 0) != 0)
      fmt::print("  {:<44} {}\n", k, v.to_display());

  if (!args.no_tensors) {
    fmt::print("\ntensors ({}):\n  {:<36} {:<8} {:<22} {:>12}\n", f.tensors().size(), "name", "type",
               "shape", "bytes");
    for (const auto& t : f.tensors())
      fmt::print("  {:<36} {:<8} {:<22} {:>12}{}\n", t.name, ggml_type_info(t.type).name, t.shape_string(),
                 t.n_bytes, t.data ? "" : "  (absent)");
  }

  fmt::print("\nbytes per layer:\n  {:>5} {:>12} {:>12} {:>12}\n", "layer", "attention", "ffn", "total");
  for (const auto& [il, l] : totals.layers) {
    const uint64_t sum = l.attention + l.ffn + l.other;
    if (il < 0)
      fmt::print("  {:>5} {:>12} {:>12} {:>12}  (embedding, output, norms)\n", "-", "", "", format_bytes(sum));
    else
      fmt::print("  {:>5} {:>12} {:>12} {:>12}\n", il, format_bytes(l.attention), format_bytes(l.ffn),
                 format_bytes(sum));
  }
  fmt::print("\nbytes per type:\n");
  for (const auto& [name, c] : totals.by_type)
    fmt::print("  {:<8} {:>5} tensors {:>12}  {:5.1f}%  {:6.4f} bits/weight\n", name, c.tensors, format_bytes(c.bytes),
               totals.bytes ? 100.0 * double(c.bytes) / double(totals.bytes) : 0.0,
               c.params ? 8.0 * double(c.bytes) / double(c.params) : 0.0);
  fmt::print("\ntotal: {} tensors, {} parameters, {} of tensor data ({:.2f} bits/weight)\n",
             f.tensors().size(), format_count(totals.params), format_bytes(totals.bytes),
             totals.params ? 8.0 * double(totals.bytes) / double(totals.params) : 0.0);
  return 0;
}

}  // namespace

Command add_inspect(CLI::App& app) {
  auto args = std::make_shared<InspectArgs>();
  auto* sub = app.add_subcommand("inspect", "Show a GGUF model's architecture, tokenizer, tensors and sizes "
                                            "(reads the header only; works when tensor data is absent)");
  sub->add_option("model", args->model, "GGUF file")->required();
  sub->add_flag("--json", args->json, "Print one JSON document for scripts");
  sub->add_flag("--no-tensors", args->no_tensors, "Leave out the per-tensor table");
  return {sub, [args] { return run_inspect(*args); }};
}

}  // namespace strata::cli
