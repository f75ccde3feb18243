// GGUF metadata values: the 13 value types of the format, arrays nested to any depth.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace strata::gguf {

enum class ValueType : uint32_t {
  u8 = 0, i8 = 1, u16 = 2, i16 = 3, u32 = 4, i32 = 5, f32 = 6, boolean = 7,
  string = 8, array = 9, u64 = 10, i64 = 11, f64 = 12,
};
std::string_view value_type_name(ValueType t);
bool is_valid_value_type(uint32_t t);
// Bytes of one scalar of this type in the file; 0 for string/array (variable length).
uint32_t scalar_size(ValueType t);

struct Value;
struct Array {
  ValueType elem_type = ValueType::u8;
  std::vector<Value> items;
};

// A metadata value. Integers are kept as u64/i64 with their declared type, so the writer
// round-trips the exact type and accessors can convert when the value fits.
struct Value {
  ValueType type = ValueType::u8;
  std::variant<uint64_t, int64_t, double, bool, std::string, Array> data;

  static Value u8(uint8_t v) { return {ValueType::u8, uint64_t(v)}; }
  static Value i8(int8_t v) { return {ValueType::i8, int64_t(v)}; }
  static Value u16(uint16_t v) { return {ValueType::u16, uint64_t(v)}; }
  static Value i16(int16_t v) { return {ValueType::i16, int64_t(v)}; }
  static Value u32(uint32_t v) { return {ValueType::u32, uint64_t(v)}; }
  static Value i32(int32_t v) { return {ValueType::i32, int64_t(v)}; }
  static Value u64(uint64_t v) { return {ValueType::u64, v}; }
  static Value i64(int64_t v) { return {ValueType::i64, v}; }
  static Value f32(float v) { return {ValueType::f32, double(v)}; }
  static Value f64(double v) { return {ValueType::f64, v}; }
  static Value boolean(bool v) { return {ValueType::boolean, v}; }
  static Value string(std::string v) { return {ValueType::string, std::move(v)}; }
  static Value array(Array a) { return {ValueType::array, std::move(a)}; }
  static Value string_array(const std::vector<std::string>& v);
  static Value f32_array(const std::vector<float>& v);
  static Value i32_array(const std::vector<int32_t>& v);

  // Short text for display: scalars in full, strings quoted and clipped, arrays as
  // "[type x N]" plus the first few items.
  std::string to_display(size_t max_items = 4) const;
};

// Deep equality: same declared type and same contents (arrays element by element).
bool operator==(const Array& a, const Array& b);
bool operator==(const Value& a, const Value& b);

}  // namespace strata::gguf
