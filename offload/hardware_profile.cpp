#include "offload/hardware_profile.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string_view>

#include <fmt/format.h>
// toml++ 3.3 (Debian 12) states some of its preconditions as TOML_ASSERT_ASSUME, which under
// NDEBUG with clang becomes __builtin_assume: input that breaks one is undefined behaviour. "[\n"
// breaks parse_key()'s (found by tests/fuzz/fuzz_profile), although parse_key() itself reports
// such a key as an error. So the assumptions are dropped; the library's own checks still run.
#include <toml++/impl/preprocessor.h>
#undef TOML_ASSERT_ASSUME
#define TOML_ASSERT_ASSUME(expr) static_assert(true)
#include <toml++/toml.h>

#include "core/units.h"

namespace strata::offload {
namespace {

// One reader per file, so every error names the file and the key path ("rates.h2d_pinned[1].gbps").
struct Reader {
  static constexpr uint64_t kMaxCount = 1u << 20;  // queue depths and thread counts
  std::string origin;

  Status err(const std::string& key, const std::string& what) const {
    return Status::error("{}: {}: {}", origin, key, what);
  }

  // Entry `key` of a per-type rate array (cpu_gemv, cpu_gemv_q8): an inline table with a known
  // GGML `type`.
  struct TypedEntry {
    const toml::table* table;
    GgmlType type;
  };
  Result<TypedEntry> typed_entry(const toml::node* node, const std::string& key) const {
    const toml::table* t = node ? node->as_table() : nullptr;
    if (!t) return err(key, "expected an inline table");
    auto tn = (*t)["type"].value<std::string>();
    if (!tn) return err(key + ".type", "missing");
    auto ty = ggml_type_from_name(*tn);
    if (!ty) return err(key + ".type", fmt::format("unknown GGML type '{}'", *tn));
    return TypedEntry{t, *ty};
  }

  Result<Provenance> prov(const toml::table& t, const std::string& key) const {
    const auto kind = t["provenance"].value<std::string>();
    if (!kind) return err(key, "missing 'provenance' (\"measured\" or \"datasheet\")");
    if (*kind == "measured") {
      auto date = t["date"].value<std::string>();
      auto machine = t["machine"].value<std::string>();
      if (!date || !machine) return err(key, "provenance \"measured\" needs 'date' and 'machine'");
      return Provenance::measured_on(*date, *machine);
    }
    if (*kind == "datasheet") {
      auto source = t["source"].value<std::string>();
      if (!source) return err(key, "provenance \"datasheet\" needs 'source'");
      return Provenance::datasheet(*source);
    }
    return err(key, fmt::format("unknown provenance '{}' (\"measured\" or \"datasheet\")", *kind));
  }

  Result<uint64_t> size_of(const toml::node* n, const std::string& key) const {
    if (!n) return err(key, "missing");
    if (auto s = n->value<std::string>()) {
      auto b = parse_bytes(*s);
      if (!b) return err(key, b.message());
      return *b;
    }
    if (auto i = n->value<int64_t>()) {
      if (*i < 0) return err(key, fmt::format("negative size {}", *i));
      return uint64_t(*i);
    }
    return err(key, "expected a size (\"12GiB\" or an integer byte count)");
  }

  Result<double> number(const toml::node* n, const std::string& key) const {
    if (!n) return err(key, "missing");
    auto v = n->value<double>();  // integers convert too
    if (!v) return err(key, "expected a number");
    if (!std::isfinite(*v) || *v < 0) return err(key, fmt::format("must be >= 0 (got {})", *v));
    return *v;
  }

  const toml::table* table(const toml::node* n) const { return n ? n->as_table() : nullptr; }

  Result<Bytes> bytes(const toml::table& parent, const std::string& section, const char* name) const {
    const std::string key = section + "." + name;
    const toml::table* t = table(parent.get(name));
    if (!t) return err(key, parent.get(name) ? "expected an inline table { bytes = ..., provenance = ... }" : "missing");
    auto b = size_of(t->get("bytes"), key + ".bytes");
    if (!b) return b.status();
    auto p = prov(*t, key);
    if (!p) return p.status();
    return Bytes{*b, *p};
  }

  Result<Rate> rate(const toml::table& parent, const std::string& section, const char* name, const char* unit) const {
    const std::string key = section + "." + name;
    const toml::table* t = table(parent.get(name));
    if (!t) return err(key, parent.get(name) ? "expected an inline table" : "missing");
    auto v = number(t->get(unit), key + "." + unit);
    if (!v) return v.status();
    auto p = prov(*t, key);
    if (!p) return p.status();
    return Rate{*v, *p};
  }

  // An array of points keyed by `key_name` (a size when `key_is_size`).
  Result<std::vector<RatePoint>> points(const toml::table& parent, const std::string& section, const char* name,
                                        const char* key_name, bool key_is_size) const {
    const std::string key = section + "." + name;
    const toml::array* a = parent.get(name) ? parent.get(name)->as_array() : nullptr;
    if (!a) return err(key, parent.get(name) ? "expected an array of inline tables" : "missing");
    std::vector<RatePoint> out;
    for (size_t i = 0; i < a->size(); ++i) {
      const std::string k = fmt::format("{}[{}]", key, i);
      const toml::table* t = a->get(i)->as_table();
      if (!t) return err(k, "expected an inline table");
      RatePoint pt;
      if (key_is_size) {
        auto s = size_of(t->get(key_name), k + "." + key_name);
        if (!s) return s.status();
        pt.key = *s;
      } else {
        auto v = number(t->get(key_name), k + "." + key_name);
        if (!v) return v.status();
        // A queue depth or thread count; converting a larger double to uint64 is undefined.
        if (*v > double(kMaxCount)) return err(k + "." + key_name, fmt::format("{} is beyond {}", *v, kMaxCount));
        pt.key = uint64_t(*v);
      }
      auto g = number(t->get("gbps"), k + ".gbps");
      if (!g) return g.status();
      pt.gbps = *g;
      auto p = prov(*t, k);
      if (!p) return p.status();
      pt.prov = *p;
      out.push_back(pt);
    }
    std::sort(out.begin(), out.end(), [](auto& x, auto& y) { return x.key < y.key; });
    return out;
  }
};

// The text toml++ 3.3 (Debian 12) gets is pure ASCII, because toml++'s
// is_non_ascii_horizontal_whitespace() reaches __builtin_unreachable (undefined behaviour, with any
// compiler) for U+00A1..U+0499, U+2D6E..U+3168 and U+FC00..U+FEFE whenever it classifies one
// outside a string: after a bad value it scans on, classifying each code point, and every attempt
// to predict where toml++ thinks strings are was beaten by tests/fuzz/fuzz_profile (findings 2, 9
// and 10 in docs/hardening.md). So instead of predicting, non-ASCII never reaches it:
//  - in basic strings ("..." and """...""") each code point becomes its \uXXXX / \UXXXXXXXX escape,
//    which means the same to TOML;
//  - in comments each byte becomes '?' (a comment means nothing);
//  - anywhere else (bare keys, values, literal strings '...') it is an error naming line and column.
// Whatever this scanner misjudges in malformed text, toml++ then sees only ASCII. Also rejected:
// control characters other than tab and line breaks (strings must escape them; "[\x08" broke
// parse_key()'s precondition) and malformed UTF-8. Positions in toml++'s own messages count
// columns in the escaped text.
Result<std::string> ascii_toml_text(std::string_view text, const std::string& origin) {
  size_t line = 1, line_start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f)
      return Status::error("{}:{}:{}: control character 0x{:02x} (TOML allows only tab and line breaks)", origin,
                           line, i - line_start + 1, c);
    if (c == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  line = 1, line_start = 0;
  auto where = [&](size_t i) { return fmt::format("{}:{}:{}", origin, line, i - line_start + 1); };
  // The code point starting at text[i] (strict UTF-8: no overlongs, surrogates or values past
  // U+10FFFF) and its length; 0 length when malformed.
  auto decode = [&](size_t i, char32_t& cp) -> size_t {
    const auto b0 = static_cast<unsigned char>(text[i]);
    const size_t n = b0 >= 0xF0 && b0 <= 0xF4 ? 4 : b0 >= 0xE0 ? 3 : b0 >= 0xC2 && b0 <= 0xDF ? 2 : 0;
    if (n == 0 || i + n > text.size()) return 0;
    cp = b0 & (n == 2 ? 0x1F : n == 3 ? 0x0F : 0x07);
    for (size_t k = 1; k < n; ++k) {
      const auto b = static_cast<unsigned char>(text[i + k]);
      if ((b & 0xC0) != 0x80) return 0;
      cp = (cp << 6) | (b & 0x3F);
    }
    const char32_t min = n == 2 ? 0x80 : n == 3 ? 0x800 : 0x10000;
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return n;
  };
  std::string out;
  out.reserve(text.size());
  // A quote opens a string only where TOML allows one (a key at the start of a line or after '.',
  // '{' or ','; a value after '=', '[' or ','), judged by the last character outside strings and
  // spaces. Elsewhere ('4"x"') toml++ does not read a string either.
  char prev = '\n';
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (c == '\n') {
      out += c;
      ++line;
      line_start = ++i;
      prev = c;
    } else if (c == ' ' || c == '\t' || c == '\r') {
      out += c;
      ++i;
    } else if (c == '#') {  // comment: to the end of the line
      for (; i < text.size() && text[i] != '\n'; ++i) out += static_cast<unsigned char>(text[i]) >= 0x80 ? '?' : text[i];
    } else if ((c == '"' || c == '\'') && std::string_view("\n=[,{.").find(prev) != std::string_view::npos) {
      prev = c;
      const bool multi = text.compare(i, 3, std::string(3, c)) == 0;
      const size_t open = multi ? 3 : 1;
      out.append(text.substr(i, open));
      i += open;
      // Until the closing delimiter (basic strings skip escaped characters); an unterminated
      // single-line string ends at the line break, where toml++ reports it.
      while (i < text.size()) {
        const auto b = static_cast<unsigned char>(text[i]);
        if (c == '"' && b == '\\') {
          if (i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) >= 0x80)
            return Status::error("{}: invalid escape sequence (a backslash before a non-ASCII character)", where(i));
          out.append(text.substr(i, 2));
          if (i + 1 < text.size() && text[i + 1] == '\n') {
            ++line;
            line_start = i + 2;
          }
          i += 2;
        } else if (multi ? text.compare(i, 3, std::string(3, c)) == 0 : b == static_cast<unsigned char>(c)) {
          out.append(text.substr(i, open));
          i += open;
          // """a"""" is a'"': up to two more quotes belong to the string.
          for (int k = 0; multi && k < 2 && i < text.size() && text[i] == c; ++k) out += text[i++];
          break;
        } else if (!multi && b == '\n') {
          break;
        } else if (b >= 0x80) {
          if (c == '\'')
            return Status::error("{}: non-ASCII character in a literal string ('...'): use a basic string (\"...\")",
                                 where(i));
          char32_t cp = 0;
          const size_t n = decode(i, cp);
          if (n == 0) return Status::error("{}: malformed UTF-8", where(i));
          out += cp <= 0xFFFF ? fmt::format("\\u{:04X}", uint32_t(cp)) : fmt::format("\\U{:08X}", uint32_t(cp));
          i += n;
        } else {
          if (b == '\n') {
            ++line;
            line_start = i + 1;
          }
          out += text[i++];
        }
      }
    } else if (static_cast<unsigned char>(c) >= 0x80) {
      return Status::error("{}: non-ASCII character outside a string or comment", where(i));
    } else {
      out += c;
      prev = c;
      ++i;
    }
  }
  return out;
}

std::string escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    // Control characters are not allowed raw in a TOML basic string.
    if ((unsigned char)c < 0x20 || c == 0x7f) o += fmt::format("\\u{:04X}", (unsigned char)c);
    else o += c;
  }
  return o;
}

std::string prov_toml(const Provenance& p) {
  if (p.kind == Provenance::Kind::measured)
    return fmt::format("provenance = \"measured\", date = \"{}\", machine = \"{}\"", escape(p.date), escape(p.machine));
  return fmt::format("provenance = \"datasheet\", source = \"{}\"", escape(p.source));
}

// Exact byte count when no binary unit is exact, else "12GiB": round trips through parse_bytes.
std::string size_toml(uint64_t b) {
  if (b && b % kGiB == 0) return fmt::format("\"{}GiB\"", b / kGiB);
  if (b && b % kMiB == 0) return fmt::format("\"{}MiB\"", b / kMiB);
  if (b > uint64_t(INT64_MAX)) return fmt::format("\"{}\"", b);  // TOML integers are 64-bit signed
  return fmt::format("{}", b);
}


}  // namespace

double HardwareProfile::h2d_gbps(uint64_t chunk_bytes) const {
  if (h2d_pinned.empty()) return 0;
  if (chunk_bytes <= h2d_pinned.front().key) return h2d_pinned.front().gbps;
  if (chunk_bytes >= h2d_pinned.back().key) return h2d_pinned.back().gbps;
  for (size_t i = 1; i < h2d_pinned.size(); ++i) {
    const auto& a = h2d_pinned[i - 1];
    const auto& b = h2d_pinned[i];
    if (chunk_bytes <= b.key) {
      const double t = (std::log(double(chunk_bytes)) - std::log(double(a.key))) /
                       std::max(1e-12, std::log(double(b.key)) - std::log(double(a.key)));
      return a.gbps + t * (b.gbps - a.gbps);
    }
  }
  return h2d_pinned.back().gbps;
}

double HardwareProfile::nvme_gbps() const {
  double best = 0;
  for (const auto& p : nvme_read) best = std::max(best, p.gbps);
  return best;
}

double HardwareProfile::host_gbps() const {
  double best = 0;
  for (const auto& p : host_read) best = std::max(best, p.gbps);
  return best;
}

double HardwareProfile::cpu_gemv_gbps(GgmlType type) const {
  double slowest = 0;
  bool any = false;
  for (const auto& g : cpu_gemv) {
    if (g.type == type) return g.gbps;
    slowest = any ? std::min(slowest, g.gbps) : g.gbps;
    any = true;
  }
  return slowest;
}

double HardwareProfile::cpu_gemv_q8_gbps(GgmlType type, uint32_t cols) const {
  uint32_t threads = 0;
  for (const auto& g : cpu_gemv_q8)
    if (g.type == type) threads = std::max(threads, g.threads);
  // (cols, seconds per weight GB) at those threads, ascending in cols.
  std::vector<std::pair<double, double>> pts;
  for (const auto& g : cpu_gemv_q8)
    if (g.type == type && g.threads == threads && g.gbps > 0) pts.push_back({double(g.cols), 1.0 / g.gbps});
  if (pts.empty()) return 0;
  std::sort(pts.begin(), pts.end());
  const double c = std::max<double>(1, cols);
  double t;
  if (pts.size() == 1) {
    t = pts[0].second * c / pts[0].first;
  } else {
    size_t i = 1;
    while (i + 1 < pts.size() && pts[i].first < c) ++i;
    const auto& [c0, t0] = pts[i - 1];
    const auto& [c1, t1] = pts[i];
    // More columns never take less time than fewer (noisy points must not extrapolate downwards).
    t = c <= c0 ? t0 * c / c0 : std::max(t0, t0 + (t1 - t0) * (c - c0) / (c1 - c0));
  }
  return t > 0 ? 1.0 / t : 0;
}

Status validate_profile(const HardwareProfile& p) {
  const std::string& o = p.name;
  if (p.pinned_budget.bytes > p.host_ram.bytes)
    return Status::error("{}: capacity.pinned_budget ({}) exceeds capacity.host_ram ({})", o,
                         format_bytes(p.pinned_budget.bytes), format_bytes(p.host_ram.bytes));
  if (p.has_gpu()) {
    if (p.device_read_gbps.value <= 0) return Status::error("{}: rates.device_read must be > 0 with a GPU", o);
    if (p.gpu_gemm_tflops.value <= 0) return Status::error("{}: rates.gpu_gemm must be > 0 with a GPU", o);
    if (p.h2d_pinned.empty()) return Status::error("{}: rates.h2d_pinned needs at least one point with a GPU", o);
    if (p.cuda_context.bytes >= p.vram_budget.bytes)
      return Status::error("{}: capacity.cuda_context ({}) leaves nothing of capacity.vram_budget ({})", o,
                           format_bytes(p.cuda_context.bytes), format_bytes(p.vram_budget.bytes));
  }
  if (p.host_read.empty() || p.host_gbps() <= 0) return Status::error("{}: rates.host_read needs a point > 0", o);
  if (p.cpu_gemv.empty()) return Status::error("{}: rates.cpu_gemv needs at least one type", o);
  for (const auto& g : p.cpu_gemv)
    if (g.gbps <= 0) return Status::error("{}: rates.cpu_gemv for {} must be > 0", o, ggml_type_info(g.type).name);
  for (const auto& g : p.cpu_gemv_q8)
    if (g.gbps <= 0 || g.threads == 0 || g.cols == 0)
      return Status::error("{}: rates.cpu_gemv_q8 for {} needs threads, cols and gbps > 0", o,
                           ggml_type_info(g.type).name);
  if (p.nvme_budget.bytes > 0 && p.nvme_gbps() <= 0)
    return Status::error("{}: capacity.nvme_budget is set but rates.nvme_read has no point > 0", o);
  return Status::ok();
}

Result<HardwareProfile> parse_profile(const std::string& text, const std::string& origin) {
  auto ascii = ascii_toml_text(text, origin);
  if (!ascii) return ascii.status();
  toml::table root;
  try {
    root = toml::parse(*ascii, origin);
  } catch (const toml::parse_error& e) {
    return Status::error("{}:{}:{}: TOML syntax: {}", origin, e.source().begin.line, e.source().begin.column,
                         std::string(e.description()));
  }
  Reader r{origin};
  HardwareProfile p;
  p.name = root["name"].value_or(std::string());
  if (p.name.empty()) return r.err("name", "missing");
  p.description = root["description"].value_or(std::string());
  const toml::table* cap = root["capacity"].as_table();
  if (!cap) return r.err("capacity", "missing table [capacity]");
  const toml::table* rates = root["rates"].as_table();
  if (!rates) return r.err("rates", "missing table [rates]");

#define STRATA_READ(dst, expr)         \
  do {                                 \
    auto v_ = (expr);                  \
    if (!v_) return v_.status();       \
    dst = std::move(*v_);              \
  } while (0)
  STRATA_READ(p.vram_budget, r.bytes(*cap, "capacity", "vram_budget"));
  STRATA_READ(p.pinned_budget, r.bytes(*cap, "capacity", "pinned_budget"));
  STRATA_READ(p.host_ram, r.bytes(*cap, "capacity", "host_ram"));
  STRATA_READ(p.nvme_budget, r.bytes(*cap, "capacity", "nvme_budget"));
  STRATA_READ(p.cuda_context, r.bytes(*cap, "capacity", "cuda_context"));
  p.nvme_path = (*cap)["nvme_path"].value_or(std::string());
  STRATA_READ(p.device_read_gbps, r.rate(*rates, "rates", "device_read", "gbps"));
  STRATA_READ(p.gpu_gemm_tflops, r.rate(*rates, "rates", "gpu_gemm", "tflops"));
  STRATA_READ(p.h2d_pinned, r.points(*rates, "rates", "h2d_pinned", "chunk", true));
  STRATA_READ(p.nvme_read, r.points(*rates, "rates", "nvme_read", "qd", false));
  STRATA_READ(p.host_read, r.points(*rates, "rates", "host_read", "threads", false));
  const toml::array* gemv = (*rates)["cpu_gemv"].as_array();
  if (!gemv) return r.err("rates.cpu_gemv", "missing (array of { type = \"q4_K\", gbps = ... })");
  for (size_t i = 0; i < gemv->size(); ++i) {
    const std::string k = fmt::format("rates.cpu_gemv[{}]", i);
    Reader::TypedEntry e{};
    STRATA_READ(e, r.typed_entry(gemv->get(i), k));
    const toml::table* t = e.table;
    GemvRate g;
    g.type = e.type;
    STRATA_READ(g.gbps, r.number(t->get("gbps"), k + ".gbps"));
    STRATA_READ(g.prov, r.prov(*t, k));
    p.cpu_gemv.push_back(g);
  }
  // Optional: profiles written before strata probe measured the int8 kernels have none.
  if (const toml::node* q8n = rates->get("cpu_gemv_q8")) {
    const toml::array* q8 = q8n->as_array();
    if (!q8) return r.err("rates.cpu_gemv_q8", "expected an array of { type, threads, cols, gbps }");
    for (size_t i = 0; i < q8->size(); ++i) {
      const std::string k = fmt::format("rates.cpu_gemv_q8[{}]", i);
      Reader::TypedEntry e{};
      STRATA_READ(e, r.typed_entry(q8->get(i), k));
      const toml::table* t = e.table;
      GemvQ8Rate g;
      g.type = e.type;
      double threads = 0, cols = 0;
      STRATA_READ(threads, r.number(t->get("threads"), k + ".threads"));
      STRATA_READ(cols, r.number(t->get("cols"), k + ".cols"));
      if (threads < 1 || threads > 65536 || cols < 1 || cols > 65536)
        return r.err(k, "threads and cols must be in 1..65536");
      g.threads = uint32_t(threads), g.cols = uint32_t(cols);
      STRATA_READ(g.gbps, r.number(t->get("gbps"), k + ".gbps"));
      STRATA_READ(g.prov, r.prov(*t, k));
      p.cpu_gemv_q8.push_back(g);
    }
  }
#undef STRATA_READ
  if (auto s = validate_profile(p); !s) return s.with_context(origin);
  return p;
}

Result<HardwareProfile> load_profile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::error("{}: cannot open hardware profile", path);
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_profile(ss.str(), path);
}

std::string profile_to_toml(const HardwareProfile& p) {
  std::string o;
  o += fmt::format("# strata hardware profile (schema: offload/hardware_profile.h)\n");
  o += fmt::format("name = \"{}\"\ndescription = \"{}\"\n\n[capacity]\n", escape(p.name), escape(p.description));
  auto bytes = [&](const char* k, const Bytes& b) {
    o += fmt::format("{} = {{ bytes = {}, {} }}\n", k, size_toml(b.bytes), prov_toml(b.prov));
  };
  bytes("vram_budget", p.vram_budget);
  bytes("pinned_budget", p.pinned_budget);
  bytes("host_ram", p.host_ram);
  bytes("nvme_budget", p.nvme_budget);
  bytes("cuda_context", p.cuda_context);
  o += fmt::format("nvme_path = \"{}\"\n\n[rates]\n", escape(p.nvme_path));
  o += fmt::format("device_read = {{ gbps = {}, {} }}\n", p.device_read_gbps.value, prov_toml(p.device_read_gbps.prov));
  o += fmt::format("gpu_gemm = {{ tflops = {}, {} }}\n", p.gpu_gemm_tflops.value, prov_toml(p.gpu_gemm_tflops.prov));
  auto pts = [&](const char* k, const std::vector<RatePoint>& v, const char* key, bool size) {
    o += fmt::format("{} = [\n", k);
    for (const auto& pt : v)
      o += fmt::format("  {{ {} = {}, gbps = {}, {} }},\n", key, size ? size_toml(pt.key) : fmt::format("{}", pt.key),
                       pt.gbps, prov_toml(pt.prov));
    o += "]\n";
  };
  pts("h2d_pinned", p.h2d_pinned, "chunk", true);
  pts("nvme_read", p.nvme_read, "qd", false);
  pts("host_read", p.host_read, "threads", false);
  o += "cpu_gemv = [\n";
  for (const auto& g : p.cpu_gemv)
    o += fmt::format("  {{ type = \"{}\", gbps = {}, {} }},\n", ggml_type_info(g.type).name, g.gbps, prov_toml(g.prov));
  o += "]\n";
  if (!p.cpu_gemv_q8.empty()) {
    o += "cpu_gemv_q8 = [\n";
    for (const auto& g : p.cpu_gemv_q8)
      o += fmt::format("  {{ type = \"{}\", threads = {}, cols = {}, gbps = {}, {} }},\n", ggml_type_info(g.type).name,
                       g.threads, g.cols, g.gbps, prov_toml(g.prov));
    o += "]\n";
  }
  return o;
}

Status save_profile(const HardwareProfile& p, const std::string& path) {
  std::ofstream out(path);
  if (!out) return Status::error("{}: cannot write hardware profile", path);
  out << profile_to_toml(p);
  if (!out) return Status::error("{}: write failed", path);
  return Status::ok();
}

}  // namespace strata::offload
