#include "model/imatrix.h"

#include <cmath>
#include <cstring>

#include "model/gguf_file.h"
#include "model/gguf_writer.h"

namespace strata::model {
namespace {

constexpr const char* kSum2 = ".in_sum2";
constexpr const char* kCounts = ".counts";

bool ends_with(const std::string& s, const char* suffix) {
  const size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

Result<std::vector<float>> read_f32(const gguf::TensorInfo& t, const std::string& path) {
  if (t.type != GgmlType::F32)
    return Status::error("{}: imatrix tensor '{}' has type {}, expected f32", path, t.name, ggml_type_info(t.type).name);
  if (!t.data) return Status::error("{}: imatrix tensor '{}' has no data (file cut short)", path, t.name);
  std::vector<float> v(t.n_elements);
  std::memcpy(v.data(), t.data, v.size() * sizeof(float));
  for (size_t i = 0; i < v.size(); ++i)
    if (!std::isfinite(v[i]) || v[i] < 0)
      return Status::error("{}: imatrix tensor '{}' holds {} at index {} (sums of squares are finite and >= 0)", path,
                           t.name, v[i], i);
  return v;
}

}  // namespace

std::vector<float> Imatrix::importance(const std::string& weight, uint64_t mat) const {
  const auto it = entries.find(weight);
  if (it == entries.end() || mat >= it->second.n_mat) return {};
  const ImatrixEntry& e = it->second;
  const float c = e.counts[mat];
  if (!(c > 0)) return {};
  std::vector<float> v(e.sum2.begin() + int64_t(mat * e.n_in), e.sum2.begin() + int64_t((mat + 1) * e.n_in));
  for (float& x : v) x /= c;
  return v;
}

Result<Imatrix> read_imatrix(const std::string& path) {
  auto file = gguf::File::open(path);
  if (!file) return Status::error("imatrix {}: {}", path, file.message());
  auto type = file->get_string("general.type", "imatrix");
  if (!type) return type.status();
  if (*type != "imatrix")
    return Status::error("{}: general.type is '{}', not an imatrix (llama.cpp's legacy .dat format is not read; "
                         "convert it with llama-imatrix --in-file)", path, *type);
  Imatrix m;
  auto chunks = file->get_u32("imatrix.chunk_count", 0);
  auto size = file->get_u32("imatrix.chunk_size", 0);
  if (!chunks) return chunks.status();
  if (!size) return size.status();
  m.chunk_count = *chunks;
  m.chunk_size = *size;
  if (file->has("imatrix.datasets")) {
    auto arr = file->get_array("imatrix.datasets");
    if (!arr) return arr.status();
    for (const auto& v : (*arr)->items)
      if (const auto* s = std::get_if<std::string>(&v.data)) m.datasets.push_back(*s);
  }
  size_t n_sum2 = 0;
  for (const auto& t : file->tensors()) {
    if (!ends_with(t.name, kSum2)) continue;
    ++n_sum2;
    const std::string weight = t.name.substr(0, t.name.size() - std::strlen(kSum2));
    const auto* c = file->find_tensor(weight + kCounts);
    if (!c) return Status::error("{}: '{}' has no matching '{}{}'", path, t.name, weight, kCounts);
    ImatrixEntry e;
    e.n_in = t.ne.empty() ? 0 : t.ne[0];
    e.n_mat = e.n_in ? t.n_elements / e.n_in : 0;
    if (e.n_in == 0 || c->n_elements != e.n_mat)
      return Status::error("{}: '{}' {} and '{}' {} disagree (expected [n_in, n_mat] and [1, n_mat])", path, t.name,
                           t.shape_string(), c->name, c->shape_string());
    auto s = read_f32(t, path);
    if (!s) return s.status();
    auto cv = read_f32(*c, path);
    if (!cv) return cv.status();
    e.sum2 = std::move(*s);
    e.counts = std::move(*cv);
    m.entries.emplace(weight, std::move(e));
  }
  if (n_sum2 == 0) return Status::error("{}: no '<tensor>{}' entries (not an importance matrix)", path, kSum2);
  return m;
}

Status write_imatrix(const Imatrix& m, const std::string& path) {
  gguf::Writer w;
  w.set("general.type", gguf::Value::string("imatrix"));
  w.set("imatrix.datasets", gguf::Value::string_array(m.datasets));
  w.set("imatrix.chunk_count", gguf::Value::u32(m.chunk_count));
  w.set("imatrix.chunk_size", gguf::Value::u32(m.chunk_size));
  std::vector<std::pair<size_t, const std::vector<float>*>> data;
  for (const auto& [name, e] : m.entries) {
    STRATA_CHECK(e.sum2.size() == e.n_in * e.n_mat && e.counts.size() == e.n_mat, "imatrix entry '{}' malformed",
                 name);
    data.emplace_back(w.add_tensor(name + kSum2, GgmlType::F32, {e.n_in, e.n_mat}), &e.sum2);
    data.emplace_back(w.add_tensor(name + kCounts, GgmlType::F32, {1, e.n_mat}), &e.counts);
  }
  STRATA_TRY(w.begin(path));
  for (const auto& [index, v] : data) STRATA_TRY(w.write_tensor(index, v->data(), v->size() * sizeof(float)));
  return w.finish();
}

}  // namespace strata::model
