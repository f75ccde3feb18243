#include "model/gguf_value.h"

#include <fmt/format.h>

namespace strata::gguf {

std::string_view value_type_name(ValueType t) {
  static constexpr std::string_view kNames[] = {"u8",     "i8",    "u16",  "i16", "u32",
                                                "i32",    "f32",   "bool", "string", "array",
                                                "u64",    "i64",   "f64"};
  const auto i = uint32_t(t);
  return i < std::size(kNames) ? kNames[i] : "invalid";
}

bool is_valid_value_type(uint32_t t) { return t <= uint32_t(ValueType::f64); }

uint32_t scalar_size(ValueType t) {
  switch (t) {
    case ValueType::u8: case ValueType::i8: case ValueType::boolean: return 1;
    case ValueType::u16: case ValueType::i16: return 2;
    case ValueType::u32: case ValueType::i32: case ValueType::f32: return 4;
    case ValueType::u64: case ValueType::i64: case ValueType::f64: return 8;
    case ValueType::string: case ValueType::array: return 0;
  }
  return 0;
}

Value Value::string_array(const std::vector<std::string>& v) {
  Array a{ValueType::string, {}};
  a.items.reserve(v.size());
  for (const auto& s : v) a.items.push_back(Value::string(s));
  return Value::array(std::move(a));
}

Value Value::f32_array(const std::vector<float>& v) {
  Array a{ValueType::f32, {}};
  a.items.reserve(v.size());
  for (float f : v) a.items.push_back(Value::f32(f));
  return Value::array(std::move(a));
}

Value Value::i32_array(const std::vector<int32_t>& v) {
  Array a{ValueType::i32, {}};
  a.items.reserve(v.size());
  for (int32_t i : v) a.items.push_back(Value::i32(i));
  return Value::array(std::move(a));
}

bool operator==(const Array& a, const Array& b) { return a.elem_type == b.elem_type && a.items == b.items; }
bool operator==(const Value& a, const Value& b) { return a.type == b.type && a.data == b.data; }

std::string Value::to_display(size_t max_items) const {
  switch (type) {
    case ValueType::u8: case ValueType::u16: case ValueType::u32: case ValueType::u64:
      return fmt::format("{}", std::get<uint64_t>(data));
    case ValueType::i8: case ValueType::i16: case ValueType::i32: case ValueType::i64:
      return fmt::format("{}", std::get<int64_t>(data));
    case ValueType::f32: return fmt::format("{}", float(std::get<double>(data)));
    case ValueType::f64: return fmt::format("{}", std::get<double>(data));
    case ValueType::boolean: return std::get<bool>(data) ? "true" : "false";
    case ValueType::string: {
      std::string s = std::get<std::string>(data);
      const size_t limit = 60;
      std::string shown;
      for (char c : s.substr(0, limit)) shown += (c == '\n' ? std::string("\\n") : std::string(1, c));
      return fmt::format("\"{}\"{}", shown, s.size() > limit ? fmt::format("... ({} bytes)", s.size()) : "");
    }
    case ValueType::array: {
      const auto& a = std::get<Array>(data);
      std::string out = fmt::format("[{} x {}]", value_type_name(a.elem_type), a.items.size());
      if (max_items == 0 || a.items.empty()) return out;
      out += " ";
      for (size_t i = 0; i < a.items.size() && i < max_items; ++i)
        out += (i ? ", " : "") + a.items[i].to_display(0);
      if (a.items.size() > max_items) out += ", ...";
      return out;
    }
  }
  return "?";
}

}  // namespace strata::gguf
