#include "io/aligned_buffer.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/units.h"

namespace strata::io {

Result<AlignedBuffer> AlignedBuffer::allocate(uint64_t bytes) {
  AlignedBuffer b;
  if (bytes == 0) return b;
  const uint64_t size = align_up(bytes);
  void* p = nullptr;
  if (const int e = posix_memalign(&p, kDirectAlign, size); e != 0)
    return Status::error("cannot allocate a {} page-aligned buffer: {}", format_bytes(size), std::strerror(e));
  b.data_ = static_cast<uint8_t*>(p);
  b.size_ = size;
  return b;
}

AlignedBuffer::~AlignedBuffer() { std::free(data_); }

AlignedBuffer& AlignedBuffer::operator=(AlignedBuffer&& o) noexcept {
  if (this != &o) {
    std::free(data_);
    data_ = o.data_;
    size_ = o.size_;
    o.data_ = nullptr;
    o.size_ = 0;
  }
  return *this;
}

}  // namespace strata::io
