#include "offload/weight_loader.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

#include "core/log.h"
#include "core/progress.h"
#include "core/units.h"
#include "io/aligned_buffer.h"
#include "io/block_reader.h"
#include "kernels/gpu_layout.h"

namespace strata::offload {

namespace cuda = kernels::cuda;

namespace {

// 64 MiB per staging buffer: 16 reads of the reader's 4 MiB chunks, 8 in flight; large enough that
// per-read and per-copy overheads vanish, small enough to pin quickly.
constexpr uint64_t kStagingBytes = 64ull << 20;
// Loads smaller than this finish before a bar would be drawn.
constexpr uint64_t kProgressMinBytes = 256ull << 20;

// Repacks on the host (all cores) into pinned memory directly (a streamed block's slot). For device
// memory: slices of whole row groups (the layout is row-group-major, so a slice of rows repacks to a
// contiguous span) into the pinned staging buffers, each copied while the next is repacked; without
// staging, into a temporary copied synchronously.
Status load_repacked(const LoadItem& it, BounceRing* staging, cuda::Stream stream) {
  kernels::WeightView v = *it.repack;
  v.data = static_cast<const uint8_t*>(it.src);
  if (!it.to_device) {
    kernels::repack_to_gpu_layout(v, static_cast<uint8_t*>(it.dst));
    return {};
  }
  const uint64_t total = kernels::gpu_layout_bytes(v.type, v.n_in, v.n_out);
  const uint64_t group_bytes = total / uint64_t((v.n_out + kernels::kGpuRowGroup - 1) / kernels::kGpuRowGroup);
  if (!staging || group_bytes > staging->buffer_bytes()) {
    std::unique_ptr<uint8_t[]> tmp(new uint8_t[total]);  // every byte is written by the repack
    kernels::repack_to_gpu_layout(v, tmp.get());
    STRATA_TRY(cuda::copy_to_device(it.dst, tmp.get(), total, stream));
    return cuda::synchronize(stream);
  }
  const int64_t rows_per_slice = int64_t(staging->buffer_bytes() / group_bytes) * kernels::kGpuRowGroup;
  for (int64_t r0 = 0; r0 < v.n_out; r0 += rows_per_slice) {
    kernels::WeightView slice = v;
    slice.data = v.row(r0);
    slice.n_out = std::min(rows_per_slice, v.n_out - r0);
    const uint64_t n = kernels::gpu_layout_bytes(v.type, v.n_in, slice.n_out);
    auto buf = staging->acquire();
    if (!buf) return buf.status();
    kernels::repack_to_gpu_layout(slice, *buf);
    STRATA_TRY(cuda::copy_to_device(static_cast<uint8_t*>(it.dst) + uint64_t(r0 / kernels::kGpuRowGroup) * group_bytes,
                                    *buf, n, stream));
    STRATA_TRY(staging->copies_enqueued(stream));
  }
  return {};
}

Status copy_from_memory(const LoadItem& it, cuda::Stream stream) {
  if (!it.to_device) {
    std::memcpy(it.dst, it.src, it.bytes);
    return {};
  }
  return cuda::copy_to_device(it.dst, it.src, it.bytes, stream);
}

}  // namespace

Result<LoadStats> load_weights(const gguf::File& file, const std::vector<LoadItem>& items, PinnedPool& pinned,
                               cuda::Stream stream, Trace* trace) {
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
  // Two staging buffers: while one chunk is read (or repacked), the previous one is copied.
  const bool repack_to_device =
      std::any_of(items.begin(), items.end(), [](const LoadItem& it) { return it.repack && it.to_device; });
  std::unique_ptr<BounceRing> staging;
  if (reader || repack_to_device) {
    auto ring = BounceRing::create(pinned, 2, kStagingBytes, "loading weights");
    if (ring) {
      staging = std::move(ring.value());
    } else {
      log::debug("loading from the mapping: {}", ring.message());
      reader.reset();
    }
  }
  if (reader && !reader->notice().empty()) log::info("{}", reader->notice());

  double repack_seconds = 0;
  for (const auto& it : items) {
    if (it.repack) {
      const auto r0 = std::chrono::steady_clock::now();
      STRATA_TRY(load_repacked(it, staging.get(), stream).with_context("repacking weights for the GPU"));
      repack_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - r0).count();
      progress.add(it.bytes);
      continue;
    }
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
      auto buf = staging->acquire();
      if (!buf) return buf.status();
      io::ReadOp op{offset + done, n, {*buf, kStagingBytes}, "weights", std::nullopt, {}};
      STRATA_TRY(reader->read(op));
      if (it.to_device) {
        STRATA_TRY(cuda::copy_to_device(static_cast<uint8_t*>(it.dst) + done, op.data.data(), n, stream));
      } else {
        std::memcpy(static_cast<uint8_t*>(it.dst) + done, op.data.data(), n);
      }
      // The next read fills the other buffer while this one is copied.
      STRATA_TRY(staging->copies_enqueued(stream));
      progress.add(n);
      done += n;
    }
  }
  STRATA_TRY(cuda::synchronize(stream));
  progress.finish();
  st.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  st.how = reader ? fmt::format("{} reads, {} in flight", reader->backend_name(), reader->queue_depth())
                  : std::string("copied from the mapping");
  if (repack_seconds > 0) st.how += fmt::format("; {:.2f} s repacking for the GPU layout", repack_seconds);
  return st;
}

}  // namespace strata::offload
