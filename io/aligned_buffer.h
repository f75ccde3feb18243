// Page-aligned host buffers for O_DIRECT reads (kvikio's split: this allocator is kept apart from
// the pinned one, because cudaMallocHost memory is not guaranteed to be page-aligned; M5 registers
// these buffers with CUDA and io_uring instead of allocating pinned memory separately).
#pragma once

#include <cstdint>
#include <span>

#include "core/status.h"

namespace strata::io {

// O_DIRECT wants file offset, length and buffer address aligned to the device's logical block
// size; 4 KiB covers every NVMe/virtio disk we target (512 B devices accept 4 KiB alignment too).
inline constexpr uint64_t kDirectAlign = 4096;

constexpr uint64_t align_down(uint64_t x, uint64_t a = kDirectAlign) { return x - x % a; }
constexpr uint64_t align_up(uint64_t x, uint64_t a = kDirectAlign) { return align_down(x + a - 1, a); }

// Bytes of the 4 KiB-aligned span that encloses [offset, offset + bytes): what a read of that range
// needs as buffer (the exact range starts at offset % kDirectAlign inside it).
constexpr uint64_t enclosing_span_bytes(uint64_t offset, uint64_t bytes) {
  return align_up(offset + bytes) - align_down(offset);
}

// Move-only owner of a page-aligned allocation; its size is rounded up to kDirectAlign.
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  static Result<AlignedBuffer> allocate(uint64_t bytes);
  ~AlignedBuffer();
  AlignedBuffer(AlignedBuffer&& o) noexcept : data_(o.data_), size_(o.size_) { o.data_ = nullptr; o.size_ = 0; }
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;

  uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  std::span<uint8_t> span() const { return {data_, size_}; }

 private:
  uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
};

}  // namespace strata::io
