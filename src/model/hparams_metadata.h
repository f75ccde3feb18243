// The GGUF keys of a model's hyperparameters ("<arch>.context_length", "<arch>.attention.*",
// "<arch>.rope.*"): the inverse of what model_spec.cpp reads. One writer for every producer of
// GGUF files (synth, convert), so a key added to the reader is added to the writers in one place.
#pragma once

#include "model/arch.h"
#include "model/gguf_writer.h"

namespace strata::model {

// Writes general.architecture and the <arch>.* hyperparameter keys of hp; only the keys the
// architecture uses (llama: rope dimension and vocab size, and a sliding window where it has one;
// gemma3: the window, its pattern and the local RoPE base), rope scaling only where it is not 1.
void set_hparams_metadata(gguf::Writer& w, Arch arch, const HParams& hp);

}  // namespace strata::model
