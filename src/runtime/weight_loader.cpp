#include "runtime/weight_loader.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>

#include "core/log.h"
#include "core/progress.h"
#include "core/units.h"
#include "io/aligned_buffer.h"
#include "io/block_reader.h"

namespace strata::runtime {

namespace cuda = kernels::cuda;

namespace {

// 64 MiB per staging buffer: 16 reads of the reader's 4 MiB chunks, 8 in flight; large enough that
// per-read and per-copy overheads vanish, small enough to pin quickly.
constexpr uint64_t kStagingBytes = 64ull << 20;
// Loads smaller than this finish before a bar would be drawn.
constexpr uint64_t kProgressMinBytes = 256ull << 20;

// Two pinned, page-aligned staging buffers and the events that say when their copies are done.
struct Staging {
  struct Buffer {
    void* raw = nullptr;
    uint8_t* base = nullptr;
    cuda::Event copied = nullptr;
    bool busy = false;
  };
  Buffer buf[2];
  cuda::Stream stream;

  explicit Staging(cuda::Stream s) : stream(s) {}
  ~Staging() {
    (void)cuda::synchronize(stream);  // copies may still read the buffers (error paths)
    for (auto& b : buf) {
      cuda::event_destroy(b.copied);
      if (b.raw) cuda::pinned_free(b.raw);
    }
  }
  Status allocate() {
    for (auto& b : buf) {
      auto p = cuda::pinned_alloc(kStagingBytes + io::kDirectAlign);
      if (!p) return Status::error("cannot pin a {} staging buffer for loading: {}", format_bytes(kStagingBytes),
                                   p.message());
      b.raw = *p;
      b.base = reinterpret_cast<uint8_t*>(io::align_up(reinterpret_cast<uintptr_t>(b.raw)));
      auto e = cuda::event_create();
      if (!e) return e.status();
      b.copied = *e;
    }
    return {};
  }
};

Status copy_from_memory(const LoadItem& it, cuda::Stream stream) {
  if (!it.to_device) {
    std::memcpy(it.dst, it.src, it.bytes);
    return {};
  }
  return cuda::copy_to_device(it.dst, it.src, it.bytes, stream);
}

}  // namespace

Result<LoadStats> load_weights(const gguf::File& file, const std::vector<LoadItem>& items, cuda::Stream stream,
                               Trace* trace) {
  TraceScope span(trace, "host", "load weights");
  const auto t0 = std::chrono::steady_clock::now();
  LoadStats st;
  for (const auto& it : items) st.bytes += it.bytes;
  Progress progress("loading weights", st.bytes, "B", st.bytes >= kProgressMinBytes);
  const auto map = file.bytes();
  auto in_file = [&](const LoadItem& it) {
    const auto* p = static_cast<const uint8_t*>(it.src);
    return file.is_mapped_file() && p >= map.data() && p + it.bytes <= map.data() + map.size();
  };

  std::unique_ptr<io::BlockReader> reader;
  if (file.is_mapped_file()) {
    io::ReaderOptions o;
    o.direct = io::DirectIo::off;  // buffered: a cached file loads from RAM, a cold one at disk speed
    auto r = io::BlockReader::open(file.path(), o);
    if (r) reader = std::move(r.value());
    else log::debug("loading from the mapping: {}", r.message());
  }
  Staging staging(stream);
  if (reader) STRATA_TRY(staging.allocate());
  if (reader && !reader->notice().empty()) log::info("{}", reader->notice());

  int cur = 0;
  for (const auto& it : items) {
    if (!reader || !in_file(it)) {
      STRATA_TRY(copy_from_memory(it, stream));
      progress.add(it.bytes);
      continue;
    }
    const uint64_t offset = uint64_t(static_cast<const uint8_t*>(it.src) - map.data());
    // A chunk's enclosing 4 KiB-aligned span must fit the buffer: at most 2 pages more.
    const uint64_t max_chunk = kStagingBytes - 2 * io::kDirectAlign;
    for (uint64_t done = 0; done < it.bytes;) {
      const uint64_t n = std::min(max_chunk, it.bytes - done);
      auto& b = staging.buf[cur];
      if (b.busy) STRATA_TRY(cuda::event_synchronize(b.copied));
      b.busy = false;
      io::ReadOp op{offset + done, n, {b.base, kStagingBytes}, "weights", std::nullopt, {}};
      STRATA_TRY(reader->read(op));
      if (it.to_device) {
        STRATA_TRY(cuda::copy_to_device(static_cast<uint8_t*>(it.dst) + done, op.data.data(), n, stream));
        STRATA_TRY(cuda::event_record(b.copied, stream));
        b.busy = true;
        cur ^= 1;  // the next read fills the other buffer while this one is copied
      } else {
        std::memcpy(static_cast<uint8_t*>(it.dst) + done, op.data.data(), n);
      }
      progress.add(n);
      done += n;
    }
  }
  STRATA_TRY(cuda::synchronize(stream));
  progress.finish();
  st.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  st.how = reader ? fmt::format("{} reads, {} in flight", reader->backend_name(), reader->queue_depth())
                  : std::string("copied from the mapping");
  return st;
}

}  // namespace strata::runtime
