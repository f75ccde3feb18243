// A validated, memory-mapped GGUF (v2/v3) file: metadata, tensor table, data section.
//
// Everything is checked before use, and every failure names what is wrong and where (key, tensor,
// byte offset): bad magic or version, counts/lengths beyond the file, unknown value or tensor
// types, dimension overflow, duplicate keys/tensors, misaligned or out-of-bounds tensor data,
// truncation. Untrusted sizes are checked against the bytes remaining before anything is
// allocated from them.
//
// Lifetime: tensor data pointers point into the mapping and live as long as the File.
// Thread-safety: a File is immutable after open; concurrent reads are safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/ggml_type.h"
#include "core/status.h"
#include "io/mapped_file.h"
#include "model/gguf_value.h"

namespace strata::gguf {

inline constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
inline constexpr uint32_t kDefaultAlignment = 32;
inline constexpr uint32_t kMaxDims = 4;
// Limits on what a header may claim, checked before anything is allocated from the claim. The
// bytes-left checks alone bound allocations by the file size, which for a 20 GB model is no
// bound: 20e9 one-byte array items would take ~1 TB as Values. Real files stay far below:
// the largest vocabularies have ~260k tokens (x3 arrays, plus merges), chat templates ~100 KiB.
inline constexpr uint64_t kMaxMetadataValues = uint64_t(1) << 25;  // array items, all arrays together
inline constexpr uint64_t kMaxStringBytes = uint64_t(1) << 24;     // one key, name or string value

struct TensorInfo {
  std::string name;
  GgmlType type = GgmlType::F32;
  std::vector<uint64_t> ne;  // ne[0] is the row length (innermost), as in ggml
  uint64_t offset = 0;       // from the start of the data section
  uint64_t n_elements = 0;
  uint64_t n_bytes = 0;
  const uint8_t* data = nullptr;  // nullptr when the file's data section does not hold it

  uint64_t rows() const { return ne.empty() ? 1 : n_elements / ne[0]; }
  std::string shape_string() const;  // "[5376, 262144]"
};

struct OpenOptions {
  // When false, a file whose data section is missing or cut short still opens (header only:
  // `strata inspect` and `strata plan` work on it); tensors past the end get data == nullptr.
  bool require_data = true;
};

class File {
 public:
  static Result<File> open(const std::string& path, OpenOptions options = {});
  // Parses bytes already in memory (tests, fuzzing). The span must outlive the File.
  static Result<File> parse(std::span<const uint8_t> bytes, OpenOptions options = {},
                            std::string name = "<memory>");

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  uint64_t file_size() const { return bytes_.size(); }
  // The whole file as mapped (or parsed); a tensor's data pointer minus bytes().data() is its
  // offset in the file (what the io reader needs to read it directly).
  std::span<const uint8_t> bytes() const { return bytes_; }
  bool is_mapped_file() const { return mapping_ != nullptr; }
  // True when every tensor's bytes are present in the file.
  bool has_all_data() const { return has_all_data_; }

  // --- metadata ---
  const std::vector<std::pair<std::string, Value>>& metadata() const { return kv_; }
  const Value* find(const std::string& key) const;
  bool has(const std::string& key) const { return find(key) != nullptr; }
  // Typed access. Integers convert between widths/signedness when the value fits; a present key
  // of the wrong type is an error, never a silent default.
  Result<uint64_t> get_uint(const std::string& key) const;
  Result<int64_t> get_int(const std::string& key) const;
  Result<double> get_float(const std::string& key) const;
  Result<bool> get_bool(const std::string& key) const;
  Result<std::string> get_string(const std::string& key) const;
  Result<const Array*> get_array(const std::string& key) const;
  Result<uint32_t> get_u32(const std::string& key) const;
  Result<float> get_f32(const std::string& key) const;
  // With default: missing key -> fallback; present with wrong type -> error.
  Result<uint32_t> get_u32(const std::string& key, uint32_t fallback) const;
  Result<float> get_f32(const std::string& key, float fallback) const;
  Result<std::string> get_string(const std::string& key, const std::string& fallback) const;
  Result<bool> get_bool(const std::string& key, bool fallback) const;
  std::string architecture() const;  // general.architecture, or "" when missing

  // --- tensors ---
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(const std::string& name) const;

 private:
  std::string path_;
  std::shared_ptr<io::MappedFile> mapping_;  // null when parsed from memory
  std::span<const uint8_t> bytes_;
  uint32_t version_ = 0;
  uint32_t alignment_ = kDefaultAlignment;
  uint64_t data_offset_ = 0;
  bool has_all_data_ = false;
  std::vector<std::pair<std::string, Value>> kv_;
  std::map<std::string, size_t, std::less<>> kv_index_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;

  friend class Parser;
};

}  // namespace strata::gguf
