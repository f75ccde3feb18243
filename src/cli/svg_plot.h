// A minimal SVG line chart (no dependencies): series of (x, y) points on a log2 x axis, one panel
// per chart, panels stacked vertically. Enough for `strata stress` plots people would rather look
// at than read.
#pragma once

#include <string>
#include <vector>

namespace strata::cli {

struct PlotSeries {
  std::string name;
  std::vector<double> x, y;  // same length; x > 0 (log2 axis)
};
struct PlotPanel {
  std::string title, y_label;
  std::vector<PlotSeries> series;
};

// The SVG document for the panels (x axis label shared).
std::string svg_line_chart(const std::vector<PlotPanel>& panels, const std::string& x_label);

}  // namespace strata::cli
