// Fuzz target: the GGUF reader, then what model loading does with whatever parses (ModelSpec
// from the metadata, weight views checked against it). Any crash, leak, sanitizer report or
// STRATA_CHECK abort is a bug: every input must end in a value or a Status.
#include <cstddef>
#include <cstdint>
#include <span>

#include "model/gguf_file.h"
#include "model/model_spec.h"
#include "model/model_weights.h"

using namespace strata;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  // A header-only open (what `inspect`/`plan` do) accepts more files than a full one, so it
  // reaches further; the full open is checked to agree on what the header-only one accepted.
  auto file = gguf::File::parse(bytes, {.require_data = false});
  auto full = gguf::File::parse(bytes, {.require_data = true});
  if (full.is_ok() && !file.is_ok()) __builtin_trap();
  if (!file.is_ok()) return 0;

  // Every value renders and every typed accessor answers (value or error) for every key.
  size_t sink = 0;
  for (const auto& [key, value] : file->metadata()) {
    sink += value.to_display().size();
    sink += file->get_uint(key).is_ok() + file->get_int(key).is_ok() + file->get_float(key).is_ok();
    sink += file->get_bool(key).is_ok() + file->get_string(key).is_ok() + file->get_array(key).is_ok();
    sink += file->get_u32(key).is_ok() + file->get_f32(key).is_ok();
  }
  for (const auto& t : file->tensors()) {
    sink += t.shape_string().size() + t.rows();
    // A tensor with data lies wholly inside the bytes it was parsed from, and its byte size did
    // not wrap (every type takes at least one byte per block).
    if (t.data && (t.data < data || t.data + t.n_bytes > data + size)) __builtin_trap();
    if (t.n_bytes < t.n_elements / ggml_type_info(t.type).block_size) __builtin_trap();
  }

  auto spec = model::spec_from_gguf(*file);
  if (spec.is_ok()) {
    sink += spec->summary().size();
    auto weights = model::load_weights(*file, *spec);
    if (weights.is_ok()) sink += weights->layers.size();
  }
  return sink == size_t(-1);  // keeps `sink` alive; libFuzzer wants 0 (or -1 to reject)
}
