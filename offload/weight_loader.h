// WeightLoader: copies weight tensors from the model file to where the engine keeps them (device
// memory, or pinned host memory for streamed blocks), at the speed of the slower of the disk and
// PCIe rather than of page faults on the mapping.
//
// The file is read with the io reader (io/block_reader.h: io_uring, several reads in flight;
// buffered, so a file already in the page cache loads from RAM) into two pinned staging buffers:
// while one chunk is read, the previous one is copied to the device on the engine's stream.
// Matrices kept in the GPU layout (kernels/gpu_layout.h) are repacked on all cores from the
// mapping: into their pinned slot (streamed blocks), or slice by slice into the staging buffers,
// each slice copied while the next is repacked (resident ones).
// Progress is shown for large loads; the achieved rate is logged.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/trace.h"
#include "kernels/cuda/cuda_api.h"
#include "kernels/weight_view.h"
#include "model/gguf_file.h"
#include "offload/pinned_pool.h"

namespace strata::offload {

struct LoadItem {
  const void* src = nullptr;  // inside the model file's mapping
  uint64_t bytes = 0;
  void* dst = nullptr;        // device memory (to_device) or host memory
  bool to_device = true;
  // Set: src is this GGUF-layout matrix (its data == src, bytes its size), and dst receives it
  // repacked into the GPU layout (kernels/gpu_layout.h: gpu_layout_bytes of it).
  std::optional<kernels::WeightView> repack = std::nullopt;
};

struct LoadStats {
  uint64_t bytes = 0;
  double seconds = 0;
  std::string how;  // "io_uring, 8 in flight" / "from the mapping"
};

// Copies every item; on return the device copies have completed. Items whose source is not in the
// file's mapping (e.g. parsed from memory) are copied from memory. The staging buffers come from
// `pinned` and go back to it on return; when its budget has no room for them, every item is copied
// from the mapping instead (slower, same bytes). Errors name the file.
Result<LoadStats> load_weights(const gguf::File& file, const std::vector<LoadItem>& items, PinnedPool& pinned,
                               kernels::cuda::Stream stream, Trace* trace);

}  // namespace strata::offload
