// Reads a strata::Trace back through its JSON (what a trace viewer sees): the complete ("X")
// events with their track names, in the order they were added.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/trace.h"

namespace strata::test {

struct TraceSpan {
  std::string track, name;
  double ts = 0, dur = 0;
  double end() const { return ts + dur; }
};

inline std::vector<TraceSpan> trace_spans(const Trace& t) {
  const auto j = nlohmann::json::parse(t.json());
  std::map<int, std::string> tracks;
  for (const auto& e : j.at("traceEvents"))
    if (e.at("ph") == "M" && e.at("name") == "thread_name") tracks[e.at("tid")] = e.at("args").at("name");
  std::vector<TraceSpan> out;
  for (const auto& e : j.at("traceEvents"))
    if (e.at("ph") == "X") out.push_back({tracks.at(e.at("tid")), e.at("name"), e.at("ts"), e.at("dur")});
  return out;
}

}  // namespace strata::test
