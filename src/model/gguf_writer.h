// Writes GGUF v3 files that llama.cpp and strata's reader accept.
//
// Streaming by design: declare metadata and every tensor (name, type, shape) first, then
// `begin(path)` writes the header and sizes the file; tensor bytes are then written at their final
// offsets with `write_tensor(_range)`, which is safe to call from several threads at once (pwrite,
// disjoint ranges). So a 13 GB model is written with a few hundred MB of RAM.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/ggml_type.h"
#include "core/status.h"
#include "model/gguf_value.h"

namespace strata::gguf {

class Writer {
 public:
  Writer() = default;
  ~Writer();
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  // Metadata, in insertion order; setting a key again replaces its value.
  void set(const std::string& key, Value value);
  // Power of two; also written as general.alignment. Must come before add_tensor().
  void set_alignment(uint32_t alignment);

  // Declares a tensor; returns its index. ne[0] is the row length and must be a multiple of the
  // type's block size (contract: asserted).
  size_t add_tensor(const std::string& name, GgmlType type, std::vector<uint64_t> ne);
  uint64_t tensor_bytes(size_t index) const;
  uint64_t total_bytes() const;  // the size the file will have

  // Creates/truncates the file, writes the header and padding and sizes the file.
  Status begin(const std::string& path);
  // Writes just the header (metadata + tensor table): a valid "header-only" GGUF that readers
  // open with OpenOptions::require_data = false (plans and inspection of models not downloaded).
  Status write_header_only(const std::string& path);
  // Writes bytes [offset, offset + size) of tensor `index`. Thread-safe after begin().
  Status write_tensor_range(size_t index, uint64_t offset, const void* data, uint64_t size);
  Status write_tensor(size_t index, const void* data, uint64_t size);
  // fsyncs (optional) and closes; the file is complete only after finish() returned ok.
  Status finish(bool sync = false);

  // The whole header (metadata + tensor infos + padding) as bytes: for tests and fuzz seeds.
  std::vector<uint8_t> header_bytes() const;

 private:
  struct Tensor {
    std::string name;
    GgmlType type;
    std::vector<uint64_t> ne;
    uint64_t offset;  // in the data section
    uint64_t bytes;
  };
  std::vector<std::pair<std::string, Value>> kv_;
  std::vector<Tensor> tensors_;
  uint32_t alignment_ = 32;
  int fd_ = -1;
  std::string path_;
  uint64_t data_size_ = 0;             // bytes of the data section declared so far
  mutable uint64_t data_offset_ = 0;   // header size, padded; known once the header is built
};

}  // namespace strata::gguf
