#include "core/trace.h"

#include <fmt/format.h>

namespace strata {

namespace {

// JSON string escaping for span and track names (labels we make, but keep the file valid anyway).
std::string quoted(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", int(c));
    } else {
      out += c;
    }
  }
  return out + '"';
}

}  // namespace

Trace::Trace(size_t max_spans) : start_(std::chrono::steady_clock::now()), max_spans_(max_spans) {}

double Trace::now_us() const {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start_).count();
}

void Trace::span(std::string_view track, std::string name, double start_us, double dur_us) {
  std::lock_guard lock(mu_);
  if (spans_.size() >= max_spans_) {
    ++dropped_;
    return;
  }
  auto it = tracks_.find(track);
  if (it == tracks_.end()) it = tracks_.emplace(std::string(track), uint32_t(tracks_.size() + 1)).first;
  spans_.push_back({it->second, std::move(name), start_us, dur_us < 0 ? 0 : dur_us});
}

size_t Trace::size() const {
  std::lock_guard lock(mu_);
  return spans_.size();
}

size_t Trace::dropped() const {
  std::lock_guard lock(mu_);
  return dropped_;
}

std::string Trace::json() const {
  std::lock_guard lock(mu_);
  std::string out = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  out += R"({"ph":"M","pid":1,"name":"process_name","args":{"name":"strata"}})";
  // Tracks keep the order in which they first appeared (sort_index), not alphabetical order.
  for (const auto& [name, tid] : tracks_) {
    out += fmt::format(",\n{{\"ph\":\"M\",\"pid\":1,\"tid\":{},\"name\":\"thread_name\",\"args\":{{\"name\":{}}}}}", tid,
                       quoted(name));
    out += fmt::format(",\n{{\"ph\":\"M\",\"pid\":1,\"tid\":{},\"name\":\"thread_sort_index\",\"args\":{{\"sort_index\":{}}}}}",
                       tid, tid);
  }
  for (const auto& s : spans_)
    out += fmt::format(",\n{{\"ph\":\"X\",\"pid\":1,\"tid\":{},\"name\":{},\"ts\":{:.3f},\"dur\":{:.3f}}}", s.track,
                       quoted(s.name), s.start_us, s.dur_us);
  if (dropped_)
    out += fmt::format(",\n{{\"ph\":\"i\",\"pid\":1,\"tid\":0,\"s\":\"g\",\"ts\":0,\"name\":{}}}",
                       quoted(fmt::format("trace full: {} later spans were dropped", dropped_)));
  out += "\n]}\n";
  return out;
}

}  // namespace strata
