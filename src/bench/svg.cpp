// A small SVG line-plot writer: enough for tok/s against context, no plotting stack needed.
// One panel per series (own y axis, from 0 so slopes are honest); x is log-scaled when the
// contexts span 8x or more, as sweeps usually double.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "strata/bench/report.h"

namespace strata::bench {

namespace {

constexpr double kWidth = 760, kLeft = 90, kRight = 30, kTop = 50, kPanel = 220, kGap = 60, kBottom = 50;

std::string esc(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string num(double v) { return fmt::format("{:.4g}", v); }

// The smallest 1/2/2.5/5 x 10^k step giving at most `ticks` intervals up to max.
double nice_step(double max, int ticks) {
  if (!(max > 0)) return 1.0;
  const double raw = max / ticks;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (m * mag >= raw) return m * mag;
  }
  return 10.0 * mag;
}

struct XScale {
  double lo = 0, hi = 1;
  bool log = false;
  double operator()(double x) const {
    const double a = log ? std::log2(lo) : lo, b = log ? std::log2(hi) : hi;
    const double v = log ? std::log2(x) : x;
    const double f = b > a ? (v - a) / (b - a) : 0.5;
    return kLeft + f * (kWidth - kLeft - kRight);
  }
};

XScale x_scale(const std::vector<double>& xs) {
  XScale s;
  if (xs.empty()) return s;
  s.lo = *std::min_element(xs.begin(), xs.end());
  s.hi = *std::max_element(xs.begin(), xs.end());
  s.log = s.lo > 0 && s.hi / s.lo >= 8.0;
  return s;
}

std::string panel(const Plot& plot, const PlotSeries& series, const XScale& xs, double top) {
  double ymax = 0;
  for (double y : series.y) {
    if (std::isfinite(y)) ymax = std::max(ymax, y);
  }
  const double step = nice_step(ymax * 1.05, 5);
  const double ytop = step * std::max(1.0, std::ceil(ymax * 1.05 / step));
  const auto py = [&](double y) { return top + kPanel - (y / ytop) * kPanel; };
  std::string out = fmt::format("<g>\n<text x=\"{}\" y=\"{}\" font-size=\"14\" font-weight=\"bold\">{}</text>\n", kLeft,
                                top - 10, esc(series.label));
  out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#888\"/>\n", kLeft, top,
                     kWidth - kLeft - kRight, kPanel);
  for (double y = 0; y <= ytop * 1.0001; y += step) {
    out += fmt::format("<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"#ddd\"/>\n", kLeft, py(y),
                       kWidth - kRight, py(y));
    out += fmt::format("<text x=\"{}\" y=\"{:.1f}\" font-size=\"11\" text-anchor=\"end\">{}</text>\n", kLeft - 6,
                       py(y) + 4, num(y));
  }
  for (double x : plot.x) {
    out += fmt::format("<text x=\"{:.1f}\" y=\"{}\" font-size=\"11\" text-anchor=\"middle\">{}</text>\n", xs(x),
                       top + kPanel + 16, num(x));
  }
  std::string points;
  for (size_t i = 0; i < plot.x.size() && i < series.y.size(); ++i) {
    if (!std::isfinite(series.y[i])) continue;
    points += fmt::format("{}{:.1f},{:.1f}", points.empty() ? "" : " ", xs(plot.x[i]), py(series.y[i]));
    out += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.5\" fill=\"{}\"><title>{}: {}</title></circle>\n",
                       xs(plot.x[i]), py(series.y[i]), esc(series.color), num(plot.x[i]), num(series.y[i]));
  }
  out += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/>\n</g>\n", points,
                     esc(series.color));
  return out;
}

}  // namespace

std::string to_svg(const Plot& plot) {
  const XScale xs = x_scale(plot.x);
  const size_t n = std::max<size_t>(plot.series.size(), 1);
  const double height = kTop + n * kPanel + (n - 1) * kGap + kBottom;
  std::string out = fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
      "font-family=\"sans-serif\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{}\" y=\"24\" font-size=\"14\" font-weight=\"bold\">{}</text>\n",
      kWidth, height, kWidth, height, kLeft, esc(plot.title));
  for (size_t i = 0; i < plot.series.size(); ++i) {
    out += panel(plot, plot.series[i], xs, kTop + 14 + i * (kPanel + kGap));
  }
  out += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"12\" text-anchor=\"middle\">{}{}</text>\n</svg>\n",
                     (kLeft + kWidth - kRight) / 2, height - 8, esc(plot.x_label), xs.log ? " (log scale)" : "");
  return out;
}

Plot sweep_plot(const Report& rep) {
  Plot p;
  p.title = fmt::format("strata bench: {} {} on {} ({}, {} threads)", rep.model.source,
                        rep.model.recipe.value_or(rep.model.name), rep.machine.cpu_model, rep.engine, rep.threads);
  p.x_label = "context (prompt tokens before decode)";
  PlotSeries decode{"decode tok/s", "#1f77b4", {}}, prefill{"prefill tok/s", "#d62728", {}};
  for (const RunResult& r : rep.runs) {
    p.x.push_back(static_cast<double>(r.ctx));
    decode.y.push_back(r.decode_tok_s);
    prefill.y.push_back(r.prefill_tok_s);
  }
  p.series = {decode, prefill};
  return p;
}

}  // namespace strata::bench
