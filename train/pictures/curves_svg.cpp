#include "train/pictures/curves_svg.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fmt/format.h>
#include <stdexcept>

#include "train/pictures/svg_file.hpp"

namespace headgrad::train {
namespace {

constexpr int kPlotLeft = 70, kPlotW = 520, kLegendX = 625, kWidth = 940, kPlotTop = 48, kPlotGap = 52;

// One panel: its place on the page and its y axis (log10 of the values when `log`).
struct Panel {
  std::string title;
  int y, h;
  double lo, hi; // axis range (in log10 units when log)
  bool log;
};

struct Series {
  const char* cls;    // the polyline's class
  const char* label;  // for the legend
  const char* colour; // when one run is drawn; several runs take one colour each
  const char* dash;   // "" for solid
  double width, opacity;
  bool markers;       // a dot at every point (evaluations are few)
};

constexpr Series kRaw{"train-loss-raw", "training loss, every step", "#1f77b4", "", 1.0, 0.25, false};
constexpr Series kSmooth{"train-loss", "training loss, smoothed (over 1% of the steps)", "#1f77b4", "", 1.6, 1.0, false};
constexpr Series kEvalLoss{"eval-loss", "held-out loss", "#ff7f0e", "5,3", 1.6, 1.0, true};
constexpr Series kTokenAcc{"token-acc", "held-out token accuracy", "#2ca02c", "", 1.6, 1.0, true};
constexpr Series kSeqAcc{"seq-acc", "held-out sequence accuracy", "#d62728", "5,3", 1.6, 1.0, true};
constexpr Series kLr{"lr", "learning rate", "#9467bd", "", 1.6, 1.0, false};

constexpr const char* kRunColours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                       "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

double axis_value(const Panel& p, double v) { return p.log ? std::log10(std::max(v, 1e-6)) : v; }
double px_y(const Panel& p, double v) { return p.y + p.h - (axis_value(p, v) - p.lo) / (p.hi - p.lo) * p.h; }
double px_x(double step, double max_step) { return kPlotLeft + kPlotW * step / max_step; }

// Ticks at 1, 2 or 5 times a power of ten, about five over [lo, hi].
std::vector<double> linear_ticks(double lo, double hi) {
  const double raw = (hi - lo) / 5, mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = 10 * mag;
  for (double m : {1.0, 2.0, 5.0})
    if (raw <= m * mag) {
      step = m * mag;
      break;
    }
  std::vector<double> t;
  for (double v = std::ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) t.push_back(std::abs(v) < step * 1e-9 ? 0 : v);
  return t;
}

std::string polyline(const Series& s, std::size_t run, const std::string& colour,
                     const std::vector<std::pair<double, double>>& points) {
  std::string pts;
  for (const auto& [x, y] : points) pts += fmt::format("{}{:.1f},{:.1f}", pts.empty() ? "" : " ", x, y);
  std::string out = fmt::format("<polyline class=\"{}\" data-run=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"{}\" "
                                "stroke-opacity=\"{}\"{} points=\"{}\"/>\n",
                                s.cls, run, colour, s.width, s.opacity,
                                *s.dash ? fmt::format(" stroke-dasharray=\"{}\"", s.dash) : "", pts);
  if (s.markers)
    for (const auto& [x, y] : points)
      out += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"2.5\" fill=\"{}\"/>\n", x, y, colour);
  return out;
}

// The frame, grid lines, tick labels and title of a panel; the x axis runs 0..max_step.
std::string panel_frame(const Panel& p, double max_step) {
  std::string s = fmt::format("<text x=\"{}\" y=\"{}\" font-weight=\"bold\">{}</text>\n", kPlotLeft, p.y - 8,
                              xml_escape(p.title));
  std::vector<double> ys;
  if (p.log) { // every decade; over at most two, also its 2 and 5
    for (double k = p.lo; k <= p.hi; ++k)
      for (double m : {1.0, 2.0, 5.0})
        if ((m == 1 || p.hi - p.lo <= 2) && k + std::log10(m) <= p.hi) ys.push_back(k + std::log10(m));
  } else {
    ys = linear_ticks(p.lo, p.hi);
  }
  for (double a : ys) {
    const double y = p.y + p.h - (a - p.lo) / (p.hi - p.lo) * p.h;
    s += fmt::format("<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"#e4e4e4\"/>\n", kPlotLeft, y,
                     kPlotLeft + kPlotW, y);
    s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{:g}</text>\n", kPlotLeft - 6, y + 4,
                     p.log ? std::pow(10.0, a) : a);
  }
  for (double step : linear_ticks(0, max_step)) {
    const double x = px_x(step, max_step);
    s += fmt::format("<line x1=\"{:.1f}\" y1=\"{}\" x2=\"{:.1f}\" y2=\"{}\" stroke=\"#e4e4e4\"/>\n", x, p.y, x, p.y + p.h);
    s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{:g}</text>\n", x, p.y + p.h + 14, step);
  }
  s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#888\"/>\n", kPlotLeft, p.y,
                   kPlotW, p.h);
  return s;
}

// The loss axis: whole decades around every finite positive loss (at least one decade).
Panel loss_panel(const std::vector<RunCurves>& runs, int y) {
  double lo = INFINITY, hi = -INFINITY;
  auto see = [&](double v) {
    if (std::isfinite(v) && v > 0) {
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
  };
  for (const auto& r : runs) {
    for (const auto& s : r.log.steps) see(s.loss);
    for (const auto& e : r.log.evals) see(e.loss);
  }
  if (!std::isfinite(lo)) lo = hi = 1;
  Panel p{"loss (log scale)", y, 230, std::floor(std::log10(std::max(lo, 1e-6))), std::ceil(std::log10(hi)), true};
  if (p.hi <= p.lo) p.hi = p.lo + 1;
  return p;
}

Panel lr_panel(const std::vector<RunCurves>& runs, int y) {
  double hi = 0;
  for (const auto& r : runs)
    for (const auto& s : r.log.steps)
      if (std::isfinite(s.lr)) hi = std::max(hi, s.lr);
  return {"learning rate", y, 110, 0, hi > 0 ? hi * 1.05 : 1, false};
}

// Points (step, value) of the finite values, in pixels.
template <typename Row, typename Value>
std::vector<std::pair<double, double>> points_of(const std::vector<Row>& rows, const Panel& p, double max_step,
                                                 Value value) {
  std::vector<std::pair<double, double>> pts;
  for (const Row& r : rows)
    if (std::isfinite(value(r))) pts.emplace_back(px_x(static_cast<double>(r.step), max_step), px_y(p, value(r)));
  return pts;
}

std::string run_svg(const RunCurves& run, std::size_t index, bool one_run, const Panel& loss, const Panel& acc,
                    const Panel& lr, double max_step) {
  auto colour = [&](const Series& s) -> std::string { return one_run ? s.colour : kRunColours[index % 10]; };
  std::vector<double> raw;
  for (const auto& s : run.log.steps) raw.push_back(s.loss);
  const std::vector<double> smooth = smoothed(raw);
  std::vector<MetricsLog::Step> smooth_rows = run.log.steps;
  for (std::size_t i = 0; i < smooth_rows.size(); ++i) smooth_rows[i].loss = smooth[i];
  const auto loss_of = [](const auto& r) { return r.loss; };
  std::string s = fmt::format("<g class=\"run\" data-run=\"{}\"><title>{}</title>\n", index, xml_escape(run.name));
  s += polyline(kRaw, index, colour(kRaw), points_of(run.log.steps, loss, max_step, loss_of));
  s += polyline(kSmooth, index, colour(kSmooth), points_of(smooth_rows, loss, max_step, loss_of));
  s += polyline(kEvalLoss, index, colour(kEvalLoss), points_of(run.log.evals, loss, max_step, loss_of));
  s += polyline(kTokenAcc, index, colour(kTokenAcc),
                points_of(run.log.evals, acc, max_step, [](const MetricsLog::Eval& e) { return e.token_acc; }));
  s += polyline(kSeqAcc, index, colour(kSeqAcc),
                points_of(run.log.evals, acc, max_step, [](const MetricsLog::Eval& e) { return e.seq_acc; }));
  s += polyline(kLr, index, colour(kLr),
                points_of(run.log.steps, lr, max_step, [](const MetricsLog::Step& r) { return r.lr; }));
  return s + "</g>\n";
}

// A legend entry: a short line in the series' style, then the label.
std::string legend_entry(int y, const std::string& colour, const Series& style, const std::string& label) {
  return fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"{}\" "
                     "stroke-opacity=\"{}\"{}/>\n<text x=\"{}\" y=\"{}\">{}</text>\n",
                     kLegendX, y, kLegendX + 26, y, colour, style.width, style.opacity,
                     *style.dash ? fmt::format(" stroke-dasharray=\"{}\"", style.dash) : "", kLegendX + 32, y + 4,
                     xml_escape(label));
}

// One run: an entry per series in its colour. Several: an entry per run in its colour, then the
// line styles in grey.
// `per_point` > 1: the log was thinned, each point of a step series the mean of that many steps.
std::string legend_svg(const std::vector<RunCurves>& runs, std::int64_t per_point) {
  std::string s = fmt::format("<text x=\"{}\" y=\"{}\" font-weight=\"bold\">legend</text>\n", kLegendX, kPlotTop + 6);
  int y = kPlotTop + 24;
  const std::string raw = per_point > 1 ? fmt::format("training loss, mean of every {} steps", per_point)
                                        : std::string("training loss, every step");
  if (runs.size() == 1) {
    for (const Series* series : {&kRaw, &kSmooth, &kEvalLoss, &kTokenAcc, &kSeqAcc, &kLr}) {
      s += legend_entry(y, series->colour, *series, series == &kRaw ? raw : series->label);
      y += 18;
    }
    return s;
  }
  for (std::size_t i = 0; i < runs.size(); ++i) {
    std::string name = runs[i].name;
    if (name.size() > 30) name = "..." + name.substr(name.size() - 27);
    s += legend_entry(y, kRunColours[i % 10], kSmooth, name);
    y += 18;
  }
  y += 10;
  for (const auto& [series, label] : std::vector<std::pair<const Series*, std::string>>{
           {&kRaw, "faint: " + raw},
           {&kSmooth, "solid: training loss (smoothed), token acc, lr"},
           {&kEvalLoss, "dashed: held-out loss, sequence acc"}}) {
    s += legend_entry(y, "#555", *series, label);
    y += 18;
  }
  return s;
}

} // namespace

std::vector<double> smoothed(const std::vector<double>& values) {
  const double window = std::max(1.0, static_cast<double>(values.size()) / 100);
  return smoothed(values, 1 - 1 / window);
}

std::vector<double> smoothed(const std::vector<double>& values, double beta) {
  std::vector<double> out;
  out.reserve(values.size());
  double s = 0, weight = 0;
  for (double v : values) {
    if (!std::isfinite(v)) {
      out.push_back(v);
      continue;
    }
    s = beta * s + (1 - beta) * v;
    weight = beta * weight + (1 - beta); // = 1 - beta^t: the bias correction
    out.push_back(s / weight);
  }
  return out;
}

namespace {

// The log with at most 2 * kCurvePoints points per series: as CurveLog keeps it.
MetricsLog thinned(const MetricsLog& log) {
  if (log.steps.size() <= 2 * kCurvePoints && log.evals.size() <= 2 * kCurvePoints) return log;
  CurveLog c;
  for (const auto& s : log.steps) c.add_step(s.step, s.loss, s.lr);
  for (const auto& e : log.evals) c.add_eval(e.step, e.loss, e.token_acc, e.seq_acc);
  MetricsLog out = c.log();
  out.rows_per_point *= log.rows_per_point;
  return out;
}

} // namespace

std::string render_curves_svg(const std::vector<RunCurves>& given, const std::string& title) {
  std::vector<RunCurves> runs;
  std::int64_t per_point = 1;
  for (const auto& r : given) {
    runs.push_back({r.name, thinned(r.log)});
    per_point = std::max(per_point, runs.back().log.rows_per_point);
  }
  double max_step = 1;
  for (const auto& r : runs) {
    if (!r.log.steps.empty()) max_step = std::max(max_step, static_cast<double>(r.log.steps.back().step));
    if (!r.log.evals.empty()) max_step = std::max(max_step, static_cast<double>(r.log.evals.back().step));
  }
  const Panel loss = loss_panel(runs, kPlotTop + 12);
  const Panel acc{"held-out accuracy", loss.y + loss.h + kPlotGap, 150, 0, 1, false};
  const Panel lr = lr_panel(runs, acc.y + acc.h + kPlotGap);
  const int height = lr.y + lr.h + 44;
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
      "font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"10\" y=\"24\" font-size=\"15\">{}</text>\n",
      kWidth, height, kWidth, height, xml_escape(title));
  for (const Panel* p : {&loss, &acc, &lr}) s += panel_frame(*p, max_step);
  s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">optimizer step</text>\n", kPlotLeft + kPlotW / 2,
                   height - 8);
  for (std::size_t i = 0; i < runs.size(); ++i) s += run_svg(runs[i], i, runs.size() == 1, loss, acc, lr, max_step);
  s += legend_svg(runs, per_point);
  return s + "</svg>\n";
}

void write_run_curves(const std::string& out_dir, const MetricsLog& log) {
  namespace fs = std::filesystem;
  write_svg_file((fs::path(out_dir) / "curves.svg").string(),
                 render_curves_svg({{out_dir, log}}, fmt::format("training curves: {}", out_dir)));
}

} // namespace headgrad::train
