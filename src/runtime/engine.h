// An engine runs forward passes of one sequence on one device: the interface the CLI and (later)
// the batch runner and speculative decoder use, whatever the backend.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/trace.h"
#include "runtime/model.h"

namespace strata::runtime {

enum class Logits { none, last, all };

// Where the CUDA engine keeps each weight block (the executor's half of a plan; see
// runtime/residency.h for building it from offload::Plan). Default: everything resident.
struct Residency {
  std::vector<bool> attention_streamed, ffn_streamed;  // per layer; empty = none streamed
  bool head_streamed = false;
  // Of the streamed blocks, those read from the model file at each use instead of kept in pinned
  // RAM (the disk tier); same indexing, empty = none.
  std::vector<bool> attention_disk, ffn_disk;
  bool head_disk = false;
  uint32_t ring_slots = 3;     // VRAM staging slots: prefetch depth + 1
  uint64_t vram_budget = 0;    // hard limit on what the engine allocates; 0 = none
  uint64_t pinned_budget = 0;  // limit on pinned host RAM for streamed blocks; 0 = none
  bool any_streamed() const;
};

struct ForwardOptions {
  uint32_t n_ctx = 4096;  // KV positions
  uint32_t ubatch = 512;  // tokens per prefill chunk (also the sliding-window ring margin)
  // KV cache element types, chosen separately for K and V: F32, F16, Q8_0 or Q4_1 (quantised
  // types need head_dim % 32 == 0; see kv/kv_cache.h for the formats and their error bounds).
  GgmlType k_type = GgmlType::F32;
  GgmlType v_type = GgmlType::F32;
  Residency residency;    // CUDA only
  // When set, every eval adds spans to it (per weight block: compute on the CPU or GPU, streamed
  // copies; per eval: the host's view). The CUDA engine then runs without CUDA graphs, so that
  // every block of the decode step is visible.
  std::shared_ptr<Trace> trace;
};

enum class Device { cpu, cuda, automatic };

class Engine {
 public:
  virtual ~Engine() = default;
  // Runs `tokens` at positions [n_past(), n_past() + size), appending to the KV cache. logits
  // receives n_vocab floats for the last token (Logits::last) or every token (Logits::all).
  // Errors (token id out of range, context full, device failure) leave n_past() unchanged.
  virtual Status eval(std::span<const int32_t> tokens, Logits which, std::vector<float>& logits) = 0;
  virtual uint32_t n_past() const = 0;
  // Forgets positions >= n (speculative rollback, or restarting the sequence with n = 0).
  virtual void truncate(uint32_t n) = 0;
  virtual uint32_t n_ctx() const = 0;
  virtual const Model& model() const = 0;
  virtual std::string_view device_name() const = 0;
  // Device memory this engine allocated at its peak (0 for the CPU engine).
  virtual uint64_t vram_peak_bytes() const { return 0; }
  // Weight bytes copied host -> device by streaming so far (0 when everything is resident).
  virtual uint64_t streamed_bytes() const { return 0; }
  // Of those, the bytes read from the model file by the disk tier.
  virtual uint64_t disk_bytes() const { return 0; }
};

// automatic: CUDA when built with it and a device is present, else CPU.
Result<std::unique_ptr<Engine>> make_engine(std::shared_ptr<const Model> model, ForwardOptions options, Device device);

}  // namespace strata::runtime
