#include "spec/spec_config.h"

#include <charconv>

#include <fmt/format.h>

#include "runtime/engine.h"

namespace strata::spec {

std::string SpecConfig::text() const {
  switch (mode) {
    case SpecMode::none: return "none";
    case SpecMode::lookup: return "lookup";
    case SpecMode::early: return "early:d=" + std::to_string(depth) + (tree ? ",tree=" + std::to_string(tree) : "");
    case SpecMode::subset: return skip_ratio > 0 ? fmt::format("subset:skip={:g}", skip_ratio) : "subset";
    case SpecMode::shadow: return fmt::format("shadow:{}", ggml_type_info(shadow_type).name);
    case SpecMode::automatic: return "auto:d=" + std::to_string(depth);
    case SpecMode::replay: return "replay";
  }
  return "?";
}

uint32_t default_depth(uint32_t n_layer) { return n_layer < 2 ? 0 : std::max(1u, (2 * n_layer + 2) / 3); }

Result<SpecConfig> parse_spec(std::string_view text, uint32_t draft_max, uint32_t n_layer) {
  SpecConfig c;
  const uint32_t max_k = runtime::kMaxExactRows - 1;  // the pending token takes a verify row too
  if (draft_max < 1 || draft_max > max_k)
    return Status::error("--draft-max must be in [1, {}] (got {})", max_k, draft_max);
  c.draft_max = draft_max;
  const size_t colon = text.find(':');
  const std::string_view mode = text.substr(0, colon), arg = colon == text.npos ? "" : text.substr(colon + 1);
  if (mode == "none") c.mode = SpecMode::none;
  else if (mode == "lookup") c.mode = SpecMode::lookup;
  else if (mode == "early") c.mode = SpecMode::early;
  else if (mode == "auto") c.mode = SpecMode::automatic;
  else if (mode == "subset") c.mode = SpecMode::subset;
  else if (mode == "shadow") c.mode = SpecMode::shadow;
  else
    return Status::error("--spec '{}': expected none, early:d=N, subset[:skip=R], shadow[:TYPE], lookup or auto", text);
  if (c.mode == SpecMode::shadow) {
    if (!arg.empty()) {
      const auto type = ggml_type_from_name(arg);
      if (!type) return Status::error("--spec '{}': unknown shadow type '{}' (e.g. shadow:q2_k)", text, arg);
      c.shadow_type = *type;
    }
    return c;
  }
  const bool takes_depth = c.mode == SpecMode::early || c.mode == SpecMode::automatic;
  if (c.mode == SpecMode::subset) {
    if (n_layer < 3)
      return Status::error("--spec subset needs a model of at least 3 layers (the first and last always run; it has {})",
                           n_layer);
    if (!arg.empty()) {
      // from_chars for double: locale-independent, and the whole argument must be the number.
      const std::string_view num = arg.substr(arg.starts_with("skip=") ? 5 : arg.size());
      double r = 0;
      const auto [p, ec] = std::from_chars(num.data(), num.data() + num.size(), r);
      if (num.empty() || ec != std::errc() || p != num.data() + num.size())
        return Status::error("--spec '{}': expected subset:skip=R with R a fraction of the middle layers", text);
      if (!(r > 0 && r < 1)) return Status::error("--spec subset: skip={} must be in (0, 1)", num);
      c.skip_ratio = r;
    }
    return c;
  }
  if (!arg.empty() && !takes_depth) return Status::error("--spec {} takes no argument (got '{}')", mode, text);
  if (takes_depth) {
    c.depth = default_depth(n_layer);
    // Comma-separated d=N and (early) tree=B.
    for (std::string_view rest = arg; !rest.empty();) {
      const size_t comma = rest.find(',');
      const std::string_view item = rest.substr(0, comma);
      rest = comma == rest.npos ? std::string_view() : rest.substr(comma + 1);
      const bool is_tree = item.starts_with("tree=");
      if (is_tree && c.mode != SpecMode::early)
        return Status::error("--spec '{}': token trees need early:d=N,tree=B", text);
      uint32_t v = 0;
      const std::string_view num = item.substr(is_tree ? 5 : item.starts_with("d=") ? 2 : item.size());
      const auto [p, ec] = std::from_chars(num.data(), num.data() + num.size(), v);
      if (num.empty() || ec != std::errc() || p != num.data() + num.size())
        return Status::error("--spec '{}': expected {}:d=N{} with N a layer count", text, mode,
                             c.mode == SpecMode::early ? "[,tree=B]" : "");
      if (is_tree && (v < 1 || v > 8))
        return Status::error("--spec {}: tree={} must be in [1, 8] (children per node)", mode, v);
      (is_tree ? c.tree : c.depth) = v;
    }
    if (c.depth < 1 || c.depth >= n_layer)
      return Status::error("--spec {}: depth d={} must be in [1, {}) (the model has {} layers)", mode, c.depth, n_layer,
                           n_layer);
  }
  return c;
}

}  // namespace strata::spec
