// Unicode normalization form C (canonical decomposition, canonical ordering, canonical
// composition), as Hugging Face's NFC normalizer applies it before the qwen2 pre-tokenizer.
// Malformed UTF-8 bytes pass through unchanged.
#pragma once

#include <string>
#include <string_view>

namespace strata::tokenizer {

std::string nfc(std::string_view text);

}  // namespace strata::tokenizer
