#include "model/gguf_writer.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

#include "model/gguf_file.h"

namespace strata::gguf {
namespace {

template <typename T>
void put(std::vector<uint8_t>& out, T v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  out.insert(out.end(), p, p + sizeof(T));
}

void put_string(std::vector<uint8_t>& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}

void put_value(std::vector<uint8_t>& out, const Value& v) {
  switch (v.type) {
    case ValueType::u8: put<uint8_t>(out, uint8_t(std::get<uint64_t>(v.data))); break;
    case ValueType::i8: put<int8_t>(out, int8_t(std::get<int64_t>(v.data))); break;
    case ValueType::u16: put<uint16_t>(out, uint16_t(std::get<uint64_t>(v.data))); break;
    case ValueType::i16: put<int16_t>(out, int16_t(std::get<int64_t>(v.data))); break;
    case ValueType::u32: put<uint32_t>(out, uint32_t(std::get<uint64_t>(v.data))); break;
    case ValueType::i32: put<int32_t>(out, int32_t(std::get<int64_t>(v.data))); break;
    case ValueType::u64: put<uint64_t>(out, std::get<uint64_t>(v.data)); break;
    case ValueType::i64: put<int64_t>(out, std::get<int64_t>(v.data)); break;
    case ValueType::f32: put<float>(out, float(std::get<double>(v.data))); break;
    case ValueType::f64: put<double>(out, std::get<double>(v.data)); break;
    case ValueType::boolean: put<uint8_t>(out, std::get<bool>(v.data) ? 1 : 0); break;
    case ValueType::string: put_string(out, std::get<std::string>(v.data)); break;
    case ValueType::array: {
      const auto& a = std::get<Array>(v.data);
      put<uint32_t>(out, uint32_t(a.elem_type));
      put<uint64_t>(out, a.items.size());
      for (const auto& item : a.items) {
        STRATA_CHECK(item.type == a.elem_type, "array of {} holds a {}", value_type_name(a.elem_type),
                     value_type_name(item.type));
        put_value(out, item);
      }
      break;
    }
  }
}

Status write_all(int fd, const uint8_t* data, uint64_t size, uint64_t offset, const std::string& path) {
  while (size > 0) {
    const ssize_t n = ::pwrite(fd, data, size, off_t(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::error("{}: write of {} bytes at offset {} failed: {}", path, size, offset,
                           std::strerror(errno));
    }
    data += n;
    size -= uint64_t(n);
    offset += uint64_t(n);
  }
  return {};
}

}  // namespace

Writer::~Writer() {
  if (fd_ >= 0) ::close(fd_);
}

void Writer::set(const std::string& key, Value value) {
  STRATA_CHECK(fd_ < 0, "metadata set after begin()");
  for (auto& [k, v] : kv_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  kv_.emplace_back(key, std::move(value));
}

void Writer::set_alignment(uint32_t alignment) {
  STRATA_CHECK(alignment && !(alignment & (alignment - 1)), "alignment {} not a power of two", alignment);
  STRATA_CHECK(tensors_.empty(), "set_alignment() must come before add_tensor()");
  alignment_ = alignment;
  set("general.alignment", Value::u32(alignment));
}

size_t Writer::add_tensor(const std::string& name, GgmlType type, std::vector<uint64_t> ne) {
  STRATA_CHECK(fd_ < 0, "tensor added after begin()");
  STRATA_CHECK(!ne.empty() && ne.size() <= kMaxDims, "tensor {}: {} dims", name, ne.size());
  uint64_t n = 1;
  for (uint64_t d : ne) n *= d;
  const uint64_t bytes = ggml_row_bytes(type, n);
  // Offsets are assigned in declaration order, each tensor padded to the alignment.
  tensors_.push_back({name, type, std::move(ne), data_size_, bytes});
  data_size_ += (bytes + alignment_ - 1) / alignment_ * alignment_;
  return tensors_.size() - 1;
}

uint64_t Writer::tensor_bytes(size_t index) const { return tensors_.at(index).bytes; }

std::vector<uint8_t> Writer::header_bytes() const {
  std::vector<uint8_t> out;
  put<uint32_t>(out, kMagic);
  put<uint32_t>(out, 3);
  put<uint64_t>(out, tensors_.size());
  put<uint64_t>(out, kv_.size());
  for (const auto& [k, v] : kv_) {
    put_string(out, k);
    put<uint32_t>(out, uint32_t(v.type));
    put_value(out, v);
  }
  for (const auto& t : tensors_) {
    put_string(out, t.name);
    put<uint32_t>(out, uint32_t(t.ne.size()));
    for (uint64_t d : t.ne) put<uint64_t>(out, d);
    put<uint32_t>(out, uint32_t(t.type));
    put<uint64_t>(out, t.offset);
  }
  // The data section starts aligned; a file without tensors has no data section and, as
  // llama.cpp writes it, no padding either.
  if (!tensors_.empty()) out.resize((out.size() + alignment_ - 1) / alignment_ * alignment_, 0);
  data_offset_ = out.size();
  return out;
}

uint64_t Writer::total_bytes() const {
  header_bytes();  // sets data_offset_
  if (tensors_.empty()) return data_offset_;
  const auto& last = tensors_.back();
  return data_offset_ + last.offset + last.bytes;
}

Status Writer::begin(const std::string& path) {
  STRATA_CHECK(fd_ < 0, "begin() called twice");
  path_ = path;
  const auto header = header_bytes();
  const uint64_t total = total_bytes();
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) return Status::error("{}: cannot create: {}", path, std::strerror(errno));
  STRATA_TRY(write_all(fd_, header.data(), header.size(), 0, path));
  // Size the file now: padding between tensors reads as zeros, and a short disk fails here.
  if (::ftruncate(fd_, off_t(total)) != 0)
    return Status::error("{}: cannot size file to {} bytes: {}", path, total, std::strerror(errno));
  return {};
}

Status Writer::write_header_only(const std::string& path) {
  const auto header = header_bytes();
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::error("{}: cannot create: {}", path, std::strerror(errno));
  Status s = write_all(fd, header.data(), header.size(), 0, path);
  if (::close(fd) != 0 && s.is_ok()) s = Status::error("{}: close failed: {}", path, std::strerror(errno));
  return s;
}

Status Writer::write_tensor_range(size_t index, uint64_t offset, const void* data, uint64_t size) {
  STRATA_CHECK(fd_ >= 0, "write before begin()");
  const Tensor& t = tensors_.at(index);
  STRATA_CHECK(offset <= t.bytes && size <= t.bytes - offset, "tensor {}: write [{}, +{}) past {} bytes",
               t.name, offset, size, t.bytes);
  return write_all(fd_, static_cast<const uint8_t*>(data), size, data_offset_ + t.offset + offset, path_);
}

Status Writer::write_tensor(size_t index, const void* data, uint64_t size) {
  STRATA_CHECK(size == tensors_.at(index).bytes, "tensor {}: {} bytes given, {} expected",
               tensors_.at(index).name, size, tensors_.at(index).bytes);
  return write_tensor_range(index, 0, data, size);
}

Status Writer::finish(bool sync) {
  STRATA_CHECK(fd_ >= 0, "finish before begin()");
  Status s;
  if (sync && ::fsync(fd_) != 0) s = Status::error("{}: fsync failed: {}", path_, std::strerror(errno));
  if (::close(fd_) != 0 && s.is_ok()) s = Status::error("{}: close failed: {}", path_, std::strerror(errno));
  fd_ = -1;
  return s;
}

}  // namespace strata::gguf
