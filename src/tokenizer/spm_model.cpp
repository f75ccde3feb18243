#include "tokenizer/spm_model.h"

#include <cstring>
#include <fstream>
#include <iterator>
#include <string_view>

namespace strata::tokenizer {
namespace {

// Protocol-buffer wire format: each field is a varint key (field number << 3 | wire type)
// followed by a varint (0), 8 bytes (1), a varint length + bytes (2) or 4 bytes (5).
class PbReader {
 public:
  PbReader(std::string_view bytes, uint64_t base) : b_(bytes), base_(base) {}
  bool done() const { return pos_ >= b_.size(); }
  uint64_t offset() const { return base_ + pos_; }

  Result<uint64_t> varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= b_.size()) return Status::error("varint runs past the end at byte {}", offset());
      const uint8_t c = uint8_t(b_[pos_++]);
      v |= uint64_t(c & 0x7f) << shift;
      if (!(c & 0x80)) return v;
    }
    return Status::error("varint longer than 10 bytes at byte {}", offset());
  }
  Result<std::string_view> bytes(uint64_t n) {
    if (n > b_.size() - pos_) return Status::error("field of {} bytes runs past the end at byte {}", n, offset());
    auto s = b_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  // Skips a field's value of the given wire type.
  Status skip(uint32_t wire) {
    switch (wire) {
      case 0: { auto v = varint(); return v ? Status::ok() : v.status(); }
      case 1: { auto v = bytes(8); return v ? Status::ok() : v.status(); }
      case 2: {
        auto n = varint();
        if (!n) return n.status();
        auto v = bytes(*n);
        return v ? Status::ok() : v.status();
      }
      case 5: { auto v = bytes(4); return v ? Status::ok() : v.status(); }
      default: return Status::error("unsupported wire type {} at byte {}", wire, offset());
    }
  }

 private:
  std::string_view b_;
  size_t pos_ = 0;
  uint64_t base_;
};

struct Field {
  uint32_t number, wire;
};

Result<Field> next_field(PbReader& r) {
  auto key = r.varint();
  if (!key) return key.status();
  return Field{uint32_t(*key >> 3), uint32_t(*key & 7)};
}

Result<std::string_view> sub_message(PbReader& r) {
  auto n = r.varint();
  if (!n) return n.status();
  return r.bytes(*n);
}

Status parse_piece(std::string_view bytes, uint64_t base, SpmModel& m) {
  PbReader r(bytes, base);
  std::string piece;
  float score = 0;
  int32_t type = 1;
  while (!r.done()) {
    auto f = next_field(r);
    if (!f) return f.status();
    if (f->number == 1 && f->wire == 2) {
      auto s = sub_message(r);
      if (!s) return s.status();
      piece = std::string(*s);
    } else if (f->number == 2 && f->wire == 5) {
      auto s = r.bytes(4);
      if (!s) return s.status();
      std::memcpy(&score, s->data(), 4);
    } else if (f->number == 3 && f->wire == 0) {
      auto v = r.varint();
      if (!v) return v.status();
      type = int32_t(*v);
    } else {
      STRATA_TRY(r.skip(f->wire));
    }
  }
  if (type < 1 || type > 6) return Status::error("piece '{}' has unknown type {} (byte {})", piece, type, base);
  m.pieces.push_back(std::move(piece));
  m.scores.push_back(score);
  m.types.push_back(type);
  return {};
}

Status parse_trainer(std::string_view bytes, uint64_t base, SpmModel& m) {
  PbReader r(bytes, base);
  while (!r.done()) {
    auto f = next_field(r);
    if (!f) return f.status();
    if (f->wire != 0) {
      STRATA_TRY(r.skip(f->wire));
      continue;
    }
    auto v = r.varint();
    if (!v) return v.status();
    const auto i = int32_t(int64_t(*v));  // int32 fields: negative values are 10-byte varints
    switch (f->number) {
      case 3: m.model_type = i; break;
      case 35: m.byte_fallback = *v != 0; break;
      case 40: m.unk_id = i; break;
      case 41: m.bos_id = i; break;
      case 42: m.eos_id = i; break;
      case 43: m.pad_id = i; break;
      default: break;
    }
  }
  return {};
}

Status parse_normalizer(std::string_view bytes, uint64_t base, SpmModel& m) {
  PbReader r(bytes, base);
  while (!r.done()) {
    auto f = next_field(r);
    if (!f) return f.status();
    if (f->number == 1 && f->wire == 2) {
      auto s = sub_message(r);
      if (!s) return s.status();
      m.normalizer = std::string(*s);
    } else if ((f->number == 3 || f->number == 4) && f->wire == 0) {
      auto v = r.varint();
      if (!v) return v.status();
      (f->number == 3 ? m.add_dummy_prefix : m.remove_extra_whitespaces) = *v != 0;
    } else {
      STRATA_TRY(r.skip(f->wire));
    }
  }
  return {};
}

}  // namespace

Result<SpmModel> parse_spm_model(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::error("{}: cannot open", path);
  const std::string bytes{std::istreambuf_iterator<char>(in), {}};
  SpmModel m;
  PbReader r(bytes, 0);
  auto fail = [&](const Status& s) { return Status::error("{}: not a SentencePiece model: {}", path, s.message()); };
  while (!r.done()) {
    auto f = next_field(r);
    if (!f) return fail(f.status());
    if ((f->number == 1 || f->number == 2 || f->number == 3) && f->wire == 2) {
      const uint64_t at = r.offset();
      auto s = sub_message(r);
      if (!s) return fail(s.status());
      Status st = f->number == 1 ? parse_piece(*s, at, m) : f->number == 2 ? parse_trainer(*s, at, m)
                                                                           : parse_normalizer(*s, at, m);
      if (!st) return fail(st);
    } else {
      if (Status s = r.skip(f->wire); !s) return fail(s);
    }
  }
  if (m.pieces.empty()) return Status::error("{}: not a SentencePiece model: no pieces", path);
  return m;
}

Status set_spm_vocab(const SpmModel& m, gguf::Writer& out) {
  if (m.model_type != 1 && m.model_type != 2)
    return Status::error("SentencePiece model type {} is not supported (unigram, bpe)", m.model_type);
  const auto n = int32_t(m.pieces.size());
  auto check = [&](const char* what, int32_t id) {
    return id >= n ? Status::error("{} id {} is beyond the {} pieces", what, id, n) : Status::ok();
  };
  STRATA_TRY(check("unk", m.unk_id));
  STRATA_TRY(check("bos", m.bos_id));
  STRATA_TRY(check("eos", m.eos_id));
  STRATA_TRY(check("pad", m.pad_id));
  using gguf::Value;
  out.set("tokenizer.ggml.model", Value::string("llama"));
  out.set("tokenizer.ggml.tokens", Value::string_array(m.pieces));
  out.set("tokenizer.ggml.scores", Value::f32_array(m.scores));
  out.set("tokenizer.ggml.token_type", Value::i32_array(m.types));
  if (m.bos_id >= 0) out.set("tokenizer.ggml.bos_token_id", Value::u32(uint32_t(m.bos_id)));
  if (m.eos_id >= 0) out.set("tokenizer.ggml.eos_token_id", Value::u32(uint32_t(m.eos_id)));
  if (m.unk_id >= 0) out.set("tokenizer.ggml.unknown_token_id", Value::u32(uint32_t(m.unk_id)));
  if (m.pad_id >= 0) out.set("tokenizer.ggml.padding_token_id", Value::u32(uint32_t(m.pad_id)));
  out.set("tokenizer.ggml.add_bos_token", Value::boolean(m.bos_id >= 0));
  out.set("tokenizer.ggml.add_eos_token", Value::boolean(false));
  out.set("tokenizer.ggml.add_space_prefix", Value::boolean(m.add_dummy_prefix));
  return {};
}

}  // namespace strata::tokenizer
