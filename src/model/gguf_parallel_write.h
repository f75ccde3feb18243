// Writing a GGUF's tensor data in parallel pieces, all or nothing: what `strata synth`, `quantize`
// and `convert` share. The file is written as PATH.partial and renamed to PATH only when every
// piece and the final flush succeeded; on any error the partial file is removed, so a reader never
// finds a half-written model under the requested name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "core/progress.h"
#include "core/status.h"
#include "model/gguf_writer.h"

namespace strata::model {

// `w` holds the layout (metadata and tensors added). Calls write_piece(i) for i in [0, n_pieces)
// on `threads` oneTBB workers (<= 0: all cores); a piece writes its bytes through `w` and returns
// how much to add to `progress`. The first error stops the pieces not yet started and is returned.
Status write_gguf_in_pieces(gguf::Writer& w, const std::string& path, size_t n_pieces, int threads,
                            Progress& progress, const std::function<Result<uint64_t>(size_t)>& write_piece);

}  // namespace strata::model
