#include "model/gguf_file.h"

#include <algorithm>
#include <cstring>
#include <limits>

namespace strata::gguf {

// Reads the header with a bounds-checked cursor. Every read first checks the bytes left, so a
// hostile length or count can neither read past the end nor drive an allocation larger than the
// file itself.
class Parser {
 public:
  Parser(std::span<const uint8_t> bytes, File& out) : b_(bytes), f_(out) {}

  Status run(const OpenOptions& options);

 private:
  static constexpr int kMaxArrayDepth = 8;

  uint64_t left() const { return b_.size() - pos_; }
  template <typename T>
  Status read(T& v, const char* what) {
    if (left() < sizeof(T))
      return Status::error("truncated at offset {} while reading {} ({} bytes needed, {} left)", pos_,
                           what, sizeof(T), left());
    std::memcpy(&v, b_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return {};
  }
  Status read_string(std::string& s, const char* what);
  Status read_value(ValueType type, Value& v, int depth, const std::string& key);
  Status read_kv();
  Status read_tensor_info(uint64_t index);
  Status apply_alignment();
  Status place_tensors(const OpenOptions& options);

  std::span<const uint8_t> b_;
  uint64_t pos_ = 0;
  uint64_t values_left_ = kMaxMetadataValues;  // array items still allowed
  File& f_;
};

Status Parser::read_string(std::string& s, const char* what) {
  const uint64_t at = pos_;
  uint64_t len = 0;
  STRATA_TRY(read(len, what));
  if (len > left())
    return Status::error("{} at offset {}: length {} exceeds the {} bytes left in the file", what, at,
                         len, left());
  if (len > kMaxStringBytes)
    return Status::error("{} at offset {}: length {} is beyond strata's limit of {} bytes", what, at, len,
                         kMaxStringBytes);
  s.assign(reinterpret_cast<const char*>(b_.data() + pos_), len);
  pos_ += len;
  return {};
}

Status Parser::read_value(ValueType type, Value& v, int depth, const std::string& key) {
  v.type = type;
  switch (type) {
    case ValueType::u8: { uint8_t x{}; STRATA_TRY(read(x, "u8 value")); v.data = uint64_t(x); return {}; }
    case ValueType::i8: { int8_t x{}; STRATA_TRY(read(x, "i8 value")); v.data = int64_t(x); return {}; }
    case ValueType::u16: { uint16_t x{}; STRATA_TRY(read(x, "u16 value")); v.data = uint64_t(x); return {}; }
    case ValueType::i16: { int16_t x{}; STRATA_TRY(read(x, "i16 value")); v.data = int64_t(x); return {}; }
    case ValueType::u32: { uint32_t x{}; STRATA_TRY(read(x, "u32 value")); v.data = uint64_t(x); return {}; }
    case ValueType::i32: { int32_t x{}; STRATA_TRY(read(x, "i32 value")); v.data = int64_t(x); return {}; }
    case ValueType::u64: { uint64_t x{}; STRATA_TRY(read(x, "u64 value")); v.data = x; return {}; }
    case ValueType::i64: { int64_t x{}; STRATA_TRY(read(x, "i64 value")); v.data = x; return {}; }
    case ValueType::f32: { float x{}; STRATA_TRY(read(x, "f32 value")); v.data = double(x); return {}; }
    case ValueType::f64: { double x{}; STRATA_TRY(read(x, "f64 value")); v.data = x; return {}; }
    case ValueType::boolean: {
      uint8_t x = 0;
      const uint64_t at = pos_;
      STRATA_TRY(read(x, "bool value"));
      if (x > 1) return Status::error("bool value {} at offset {} is neither 0 nor 1", x, at);
      v.data = x != 0;
      return {};
    }
    case ValueType::string: {
      std::string s;
      STRATA_TRY(read_string(s, "string value"));
      v.data = std::move(s);
      return {};
    }
    case ValueType::array: {
      if (depth >= kMaxArrayDepth)
        return Status::error("arrays nested deeper than {} at offset {}", kMaxArrayDepth, pos_);
      const uint64_t at = pos_;
      uint32_t elem = 0;
      uint64_t count = 0;
      STRATA_TRY(read(elem, "array element type"));
      if (!is_valid_value_type(elem))
        return Status::error("array at offset {} has unknown element type {}", at, elem);
      STRATA_TRY(read(count, "array length"));
      const auto etype = ValueType(elem);
      // Smallest possible encoding of one element: a string is at least its 8-byte length, a
      // nested array its 4-byte type + 8-byte count.
      const uint64_t min_elem = etype == ValueType::string  ? 8
                                : etype == ValueType::array ? 12
                                                            : scalar_size(etype);
      if (count > left() / min_elem)
        return Status::error("array at offset {}: {} elements of type {} cannot fit in the {} bytes left",
                             at, count, value_type_name(etype), left());
      if (count > values_left_)
        return Status::error("array at offset {}: {} elements take the metadata past strata's limit of {} "
                             "array items in all", at, count, kMaxMetadataValues);
      values_left_ -= count;
      Array a;
      a.elem_type = etype;
      a.items.resize(count);
      for (uint64_t i = 0; i < count; ++i) STRATA_TRY(read_value(etype, a.items[i], depth + 1, key));
      v.data = std::move(a);
      return {};
    }
  }
  return Status::error("unknown value type {}", uint32_t(type));
}

Status Parser::read_kv() {
  const uint64_t at = pos_;
  std::string key;
  STRATA_TRY(read_string(key, "metadata key"));
  if (key.empty()) return Status::error("metadata key at offset {} is empty", at);
  uint32_t type = 0;
  STRATA_TRY(read(type, "metadata value type").with_context(fmt::format("metadata key '{}'", key)));
  if (!is_valid_value_type(type))
    return Status::error("metadata key '{}' (offset {}) has unknown value type {}", key, at, type);
  Value v;
  STRATA_TRY(read_value(ValueType(type), v, 0, key).with_context(fmt::format("metadata key '{}'", key)));
  if (f_.kv_index_.count(key)) return Status::error("duplicate metadata key '{}' at offset {}", key, at);
  f_.kv_index_.emplace(key, f_.kv_.size());
  f_.kv_.emplace_back(std::move(key), std::move(v));
  return {};
}

Status Parser::read_tensor_info(uint64_t index) {
  const uint64_t at = pos_;
  TensorInfo t;
  STRATA_TRY(read_string(t.name, "tensor name").with_context(fmt::format("tensor #{}", index)));
  const auto ctx = [&] { return fmt::format("tensor '{}' (#{}, info at offset {})", t.name, index, at); };
  if (t.name.empty()) return Status::error("{}: empty name", ctx());
  uint32_t n_dims = 0;
  STRATA_TRY(read(n_dims, "n_dims").with_context(ctx()));
  if (n_dims == 0 || n_dims > kMaxDims)
    return Status::error("{}: {} dimensions (1..{} allowed)", ctx(), n_dims, kMaxDims);
  t.ne.resize(n_dims);
  uint64_t n = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    STRATA_TRY(read(t.ne[d], "dimension").with_context(ctx()));
    if (t.ne[d] == 0) return Status::error("{}: dimension {} is zero", ctx(), d);
    if (t.ne[d] > uint64_t(std::numeric_limits<int64_t>::max()) ||
        n > uint64_t(std::numeric_limits<int64_t>::max()) / t.ne[d])
      return Status::error("{}: element count overflows (shape {})", ctx(), t.shape_string());
    n *= t.ne[d];
  }
  t.n_elements = n;
  uint32_t type = 0;
  STRATA_TRY(read(type, "tensor type").with_context(ctx()));
  const auto info = ggml_type_info(type);
  if (!info) return Status::error("{}: unknown tensor type {}", ctx(), type);
  t.type = info->type;
  if (t.ne[0] % info->block_size != 0)
    return Status::error("{}: row length {} is not a multiple of {}'s block size {}", ctx(), t.ne[0],
                         info->name, info->block_size);
  // Bytes below 2^63 too: n < 2^63 elements of a 4-byte type would wrap n_bytes (2^31 x 2^31 f32
  // made a tensor of 0 bytes that then "fit" in any file).
  const uint64_t n_blocks = n / info->block_size;
  if (n_blocks > uint64_t(std::numeric_limits<int64_t>::max()) / info->type_size)
    return Status::error("{}: byte size overflows (shape {}, type {})", ctx(), t.shape_string(), info->name);
  t.n_bytes = n_blocks * info->type_size;
  STRATA_TRY(read(t.offset, "tensor data offset").with_context(ctx()));
  if (f_.tensor_index_.count(t.name)) return Status::error("duplicate tensor name '{}' (#{})", t.name, index);
  f_.tensor_index_.emplace(t.name, f_.tensors_.size());
  f_.tensors_.push_back(std::move(t));
  return {};
}

Status Parser::apply_alignment() {
  const Value* v = f_.find("general.alignment");
  if (!v) return {};
  if (v->type != ValueType::u32)
    return Status::error("general.alignment has type {}, expected u32", value_type_name(v->type));
  const uint64_t a = std::get<uint64_t>(v->data);
  if (a == 0 || (a & (a - 1)) != 0)
    return Status::error("general.alignment = {} is not a power of two", a);
  f_.alignment_ = uint32_t(a);
  return {};
}

Status Parser::place_tensors(const OpenOptions& options) {
  const uint64_t a = f_.alignment_;
  f_.data_offset_ = (pos_ + a - 1) / a * a;
  const uint64_t size = b_.size();
  // Tensors sorted by offset must not overlap (each starts at or after the previous end).
  std::vector<size_t> order(f_.tensors_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t x, size_t y) { return f_.tensors_[x].offset < f_.tensors_[y].offset; });
  const TensorInfo* prev = nullptr;
  bool all_present = true;
  for (size_t i : order) {
    TensorInfo& t = f_.tensors_[i];
    if (t.offset % a != 0)
      return Status::error("tensor '{}': data offset {} is not a multiple of the alignment {}", t.name,
                           t.offset, a);
    if (t.offset > std::numeric_limits<uint64_t>::max() - f_.data_offset_ - t.n_bytes)
      return Status::error("tensor '{}': data offset {} overflows", t.name, t.offset);
    if (prev && t.offset < prev->offset + prev->n_bytes)
      return Status::error("tensor '{}' (data offset {}) overlaps tensor '{}' (bytes {}..{})", t.name,
                           t.offset, prev->name, prev->offset, prev->offset + prev->n_bytes);
    prev = &t;
    const uint64_t begin = f_.data_offset_ + t.offset, end = begin + t.n_bytes;
    if (end <= size) {
      t.data = b_.data() + begin;
    } else {
      all_present = false;
      if (options.require_data)
        return Status::error(
            "truncated: tensor '{}' needs file bytes {}..{} but the file has {} bytes", t.name, begin,
            end, size);
    }
  }
  f_.has_all_data_ = all_present;
  return {};
}

Status Parser::run(const OpenOptions& options) {
  uint32_t magic = 0, version = 0;
  STRATA_TRY(read(magic, "magic"));
  if (magic != kMagic) {
    char m[5] = {};
    std::memcpy(m, &magic, 4);
    for (int i = 0; i < 4; ++i) m[i] = (m[i] >= 32 && m[i] < 127) ? m[i] : '?';  // m[4] stays the terminator
    return Status::error("not a GGUF file (magic '{}', expected 'GGUF')", m);
  }
  STRATA_TRY(read(version, "version"));
  if (version == 1) return Status::error("GGUF version 1 is not supported (convert with a newer tool)");
  if (version != 2 && version != 3) {
    if ((version & 0xffff) == 0 && (version >> 24) != 0)
      return Status::error("big-endian GGUF (version field {:#x}) is not supported", version);
    return Status::error("unsupported GGUF version {} (2 and 3 are supported)", version);
  }
  f_.version_ = version;
  uint64_t n_tensors = 0, n_kv = 0;
  STRATA_TRY(read(n_tensors, "tensor count"));
  STRATA_TRY(read(n_kv, "metadata count"));
  // Every KV needs >= 13 bytes (key length, 1-char key, type... at least 8+1+4), every tensor
  // info >= 28 (name length, 1-char name, n_dims, one dim, type, offset).
  if (n_kv > left() / 13)
    return Status::error("metadata count {} cannot fit in the {} bytes after the header", n_kv, left());
  if (n_tensors > left() / 28)
    return Status::error("tensor count {} cannot fit in the {} bytes after the header", n_tensors, left());
  f_.kv_.reserve(n_kv);
  for (uint64_t i = 0; i < n_kv; ++i) STRATA_TRY(read_kv());
  STRATA_TRY(apply_alignment());
  f_.tensors_.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) STRATA_TRY(read_tensor_info(i));
  return place_tensors(options);
}

// ---------------------------------------------------------------------------------------------

std::string TensorInfo::shape_string() const {
  std::string s = "[";
  for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

Result<File> File::parse(std::span<const uint8_t> bytes, OpenOptions options, std::string name) {
  File f;
  f.path_ = std::move(name);
  f.bytes_ = bytes;
  Parser p(bytes, f);
  STRATA_TRY(p.run(options).with_context(f.path_));
  return f;
}

Result<File> File::open(const std::string& path, OpenOptions options) {
  auto mapping = io::MappedFile::open(path);
  if (!mapping) return mapping.status();
  auto f = parse(mapping.value()->bytes(), options, path);
  if (!f) return f.status();
  f->mapping_ = std::move(mapping.value());
  return f;
}

const Value* File::find(const std::string& key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

const TensorInfo* File::find_tensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

std::string File::architecture() const {
  const Value* v = find("general.architecture");
  return v && v->type == ValueType::string ? std::get<std::string>(v->data) : std::string();
}

namespace {

Status missing(const std::string& path, const std::string& key) {
  return Status::error("{}: missing metadata key '{}'", path, key);
}
Status wrong_type(const std::string& path, const std::string& key, ValueType got, const char* want) {
  return Status::error("{}: metadata key '{}' has type {}, expected {}", path, key,
                       value_type_name(got), want);
}

}  // namespace

Result<uint64_t> File::get_uint(const std::string& key) const {
  const Value* v = find(key);
  if (!v) return missing(path_, key);
  if (auto* u = std::get_if<uint64_t>(&v->data)) return *u;
  if (auto* i = std::get_if<int64_t>(&v->data)) {
    if (*i >= 0) return uint64_t(*i);
    return Status::error("{}: metadata key '{}' = {} is negative", path_, key, *i);
  }
  return wrong_type(path_, key, v->type, "an unsigned integer");
}

Result<int64_t> File::get_int(const std::string& key) const {
  const Value* v = find(key);
  if (!v) return missing(path_, key);
  if (auto* i = std::get_if<int64_t>(&v->data)) return *i;
  if (auto* u = std::get_if<uint64_t>(&v->data)) {
    if (*u <= uint64_t(std::numeric_limits<int64_t>::max())) return int64_t(*u);
    return Status::error("{}: metadata key '{}' = {} does not fit int64", path_, key, *u);
  }
  return wrong_type(path_, key, v->type, "an integer");
}

Result<double> File::get_float(const std::string& key) const {
  const Value* v = find(key);
  if (!v) return missing(path_, key);
  if (auto* d = std::get_if<double>(&v->data)) return *d;
  // Integers are accepted where a float is expected (some converters write 10000 as u32).
  if (auto* u = std::get_if<uint64_t>(&v->data)) return double(*u);
  if (auto* i = std::get_if<int64_t>(&v->data)) return double(*i);
  return wrong_type(path_, key, v->type, "a number");
}

Result<bool> File::get_bool(const std::string& key) const {
  const Value* v = find(key);
  if (!v) return missing(path_, key);
  if (auto* b = std::get_if<bool>(&v->data)) return *b;
  return wrong_type(path_, key, v->type, "bool");
}

Result<std::string> File::get_string(const std::string& key) const {
  const Value* v = find(key);
  if (!v) return missing(path_, key);
  if (auto* s = std::get_if<std::string>(&v->data)) return *s;
  return wrong_type(path_, key, v->type, "string");
}

Result<const Array*> File::get_array(const std::string& key) const {
  const Value* v = find(key);
  if (!v) return missing(path_, key);
  if (auto* a = std::get_if<Array>(&v->data)) return static_cast<const Array*>(a);
  return wrong_type(path_, key, v->type, "array");
}

Result<uint32_t> File::get_u32(const std::string& key) const {
  auto v = get_uint(key);
  if (!v) return v.status();
  if (*v > std::numeric_limits<uint32_t>::max())
    return Status::error("{}: metadata key '{}' = {} does not fit u32", path_, key, *v);
  return uint32_t(*v);
}

Result<float> File::get_f32(const std::string& key) const {
  auto v = get_float(key);
  if (!v) return v.status();
  return float(*v);
}

Result<uint32_t> File::get_u32(const std::string& key, uint32_t fallback) const {
  return has(key) ? get_u32(key) : Result<uint32_t>(fallback);
}
Result<float> File::get_f32(const std::string& key, float fallback) const {
  return has(key) ? get_f32(key) : Result<float>(fallback);
}
Result<std::string> File::get_string(const std::string& key, const std::string& fallback) const {
  return has(key) ? get_string(key) : Result<std::string>(fallback);
}
Result<bool> File::get_bool(const std::string& key, bool fallback) const {
  return has(key) ? get_bool(key) : Result<bool>(fallback);
}

}  // namespace strata::gguf
