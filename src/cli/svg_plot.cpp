#include "cli/svg_plot.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace strata::cli {
namespace {

constexpr double kW = 720, kPanelH = 260, kLeft = 80, kRight = 160, kTop = 36, kBottom = 44;
const char* const kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"};

std::string escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<') o += "&lt;";
    else if (c == '>') o += "&gt;";
    else if (c == '&') o += "&amp;";
    else o += c;
  }
  return o;
}

std::string short_num(double v) {
  const double a = std::fabs(v);
  if (a >= 1e9) return fmt::format("{:.3g}G", v / 1e9);
  if (a >= 1e6) return fmt::format("{:.3g}M", v / 1e6);
  if (a >= 1e3) return fmt::format("{:.3g}k", v / 1e3);
  return fmt::format("{:.3g}", v);
}

}  // namespace

std::string svg_line_chart(const std::vector<PlotPanel>& panels, const std::string& x_label) {
  const double h = kPanelH * double(panels.size());
  std::string out = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" "
      "font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      kW, h);
  for (size_t pi = 0; pi < panels.size(); ++pi) {
    const auto& p = panels[pi];
    const double y0 = kPanelH * double(pi);
    const double pw = kW - kLeft - kRight, ph = kPanelH - kTop - kBottom;
    double xmin = 1e300, xmax = -1e300, ymax = 0;
    for (const auto& s : p.series)
      for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
        if (s.x[i] <= 0 || !std::isfinite(s.y[i])) continue;
        xmin = std::min(xmin, std::log2(s.x[i]));
        xmax = std::max(xmax, std::log2(s.x[i]));
        ymax = std::max(ymax, s.y[i]);
      }
    if (xmin > xmax) xmin = 0, xmax = 1;
    if (xmax - xmin < 1e-9) xmax = xmin + 1;
    if (ymax <= 0) ymax = 1;
    auto px = [&](double x) { return kLeft + (std::log2(x) - xmin) / (xmax - xmin) * pw; };
    auto py = [&](double y) { return y0 + kTop + ph - y / (ymax * 1.05) * ph; };
    out += fmt::format("<text x=\"{}\" y=\"{}\" font-weight=\"bold\">{}</text>\n", kLeft, y0 + 20, escape(p.title));
    out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#888\"/>\n", kLeft,
                       y0 + kTop, pw, ph);
    for (int t = 0; t <= 4; ++t) {  // y grid
      const double v = ymax * 1.05 * t / 4, yy = py(v);
      out += fmt::format("<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"#eee\"/>\n", kLeft, yy,
                         kLeft + pw, yy);
      out += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", kLeft - 6, yy + 4, short_num(v));
    }
    for (double e = std::ceil(xmin); e <= xmax + 1e-9; e += 1) {  // x ticks at powers of two
      const double x = std::exp2(e), xx = px(x);
      out += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", xx, y0 + kTop + ph + 16,
                         short_num(x));
    }
    out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", kLeft + pw / 2,
                       y0 + kTop + ph + 34, escape(x_label));
    out += fmt::format("<text x=\"16\" y=\"{}\" transform=\"rotate(-90 16 {})\" text-anchor=\"middle\">{}</text>\n",
                       y0 + kTop + ph / 2, y0 + kTop + ph / 2, escape(p.y_label));
    for (size_t si = 0; si < p.series.size(); ++si) {
      const auto& s = p.series[si];
      const char* color = kColors[si % std::size(kColors)];
      std::string pts;
      for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i)
        if (s.x[i] > 0 && std::isfinite(s.y[i])) pts += fmt::format("{:.1f},{:.1f} ", px(s.x[i]), py(s.y[i]));
      out += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\" points=\"{}\"/>\n", color, pts);
      for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i)
        if (s.x[i] > 0 && std::isfinite(s.y[i]))
          out += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"/>\n", px(s.x[i]), py(s.y[i]), color);
      out += fmt::format("<text x=\"{}\" y=\"{}\" fill=\"{}\">{}</text>\n", kLeft + pw + 10, y0 + kTop + 14 + 16 * double(si),
                         color, escape(s.name));
    }
  }
  out += "</svg>\n";
  return out;
}

}  // namespace strata::cli
