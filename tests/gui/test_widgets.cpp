// Headless tests of the shared chart renderer (app/charts) and the chart widgets (app/gui/widgets):
// legends with full plain-text names, log axes with several labelled ticks, the marker readout,
// hover readouts, Gantt zoom and colours at thousands of boxes, heatmap label thinning, small
// sizes (every series named, clear of the x axis, from the first paint after a resize) and the
// presentation-mode type scale. Offscreen platform, set before the application.
#include <gtest/gtest.h>
#include <unistd.h>

#include <QApplication>
#include <QDir>
#include <QFile>
#include <QGraphicsLayout>
#include <QGraphicsScene>
#include <QImage>
#include <QPainter>
#include <QTest>
#include <QWheelEvent>
#include <QtCharts/QChart>
#include <QtCharts/QLegend>
#include <QtCharts/QLegendMarker>
#include <QtCharts/QXYSeries>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <regex>
#include <set>
#include <sstream>

#include "attnres/colormap.hpp"
#include "attnres/cost.hpp"
#include "attnres/hardware.hpp"
#include "attnres/pipeline.hpp"
#include "attnres/report.hpp"
#include "chart_render.hpp"
#include "widgets.hpp"

namespace attnres::gui {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    std::random_device entropy;
    path_ = fs::temp_directory_path() /
            ("attnres-widgets-" + std::to_string(entropy()) + std::to_string(entropy()));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

void settle() {
  for (int i = 0; i < 5; ++i) QApplication::processEvents();
}

// Resets the global type scale whatever a test does.
struct FontScaleGuard {
  ~FontScaleGuard() { set_chart_font_scale(1.0); }
};

ChartSeries line(std::string name, std::vector<std::pair<double, double>> points) {
  ChartSeries series;
  series.name = std::move(name);
  series.points = std::move(points);
  series.style = ChartSeries::Style::line_and_points;
  return series;
}

// A chart laid out in a scene at a given size, as render_chart_files lays it out.
struct LaidOut {
  QGraphicsScene scene;
  QChart* chart = nullptr;
  LaidOut(const ChartSpec& spec, QSize size, charts::ChartStyle style = {}) {
    chart = charts::build_chart(spec, style);
    scene.addItem(chart);
    chart->setGeometry(QRectF(QPointF(0, 0), QSizeF(size)));
    settle();
    if (chart->layout()) chart->layout()->activate();
  }
  QImage image() {
    QImage out(chart->size().toSize(), QImage::Format_ARGB32);
    out.fill(Qt::white);
    QPainter painter(&out);
    scene.render(&painter, QRectF(), QRectF(QPointF(0, 0), chart->size()));
    return out;
  }
};

ChartSpec legend_spec() {
  ChartSpec spec;
  spec.id = "legend";
  spec.title = "I/O per sublayer < 2x standard?";
  spec.x_label = "blocks N";
  spec.y_label = "I/O (x d)";
  spec.series.push_back(line("standard residual", {{1, 3}, {2, 3}, {4, 3}, {8, 3}}));
  spec.series.push_back(line("AttnRes overhead @ link_bandwidth_gbps=100 (Block AttnRes, cached)",
                             {{1, 5}, {2, 6}, {4, 7}, {8, 9}}));
  spec.series.push_back(
      line("Block AttnRes two-phase, standard layout", {{1, 4}, {2, 5}, {4, 6}, {8, 8}}));
  ChartSeries claim = line("claim: < 0.04", {{1, 6.5}, {8, 6.5}});
  claim.style = ChartSeries::Style::line;
  spec.series.push_back(claim);
  return spec;
}

// Like the cost explorer's I/O chart: log axes, six series (long names, a scatter and a line on
// a secondary axis), the current-setting marker.
ChartSpec cost_like_spec() {
  ChartSpec spec;
  spec.id = "cost_io";
  spec.title = "Residual I/O per sublayer against N";
  spec.x_label = "blocks";
  spec.y_label = "residual I/O per sublayer (x d)";
  spec.y2_label = "validation loss (paper)";
  spec.log_x = spec.log_y = true;
  std::vector<std::pair<double, double>> standard, block, full, mhc;
  for (double n : {1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0}) {
    standard.emplace_back(n, 3.0);
    block.emplace_back(n, 5.0 + n / 8);
    full.emplace_back(n, 128.0 / n + n);
    mhc.emplace_back(n, 34.0);
  }
  spec.series = {line("standard", standard), line("Block AttnRes (two-phase)", block),
                 line("Full AttnRes (two-phase)", full), line("mHC", mhc)};
  ChartSeries paper =
      line("paper Fig. 6 loss (L = 32)", {{1, 1.757}, {2, 1.753}, {4, 1.748}, {8, 1.746}});
  paper.style = ChartSeries::Style::scatter;
  paper.secondary_axis = true;
  ChartSeries baseline = line("paper baseline loss 1.766", {{1, 1.766}, {32, 1.766}});
  baseline.style = ChartSeries::Style::line;
  baseline.secondary_axis = true;
  spec.series.push_back(paper);
  spec.series.push_back(baseline);
  spec.marker_x = 8;
  spec.marker_label = "scenario: blocks = 8";
  return spec;
}

// Like the pipeline view's overhead chart: log axes, a long x title, a claim line, the marker.
ChartSpec overhead_like_spec() {
  ChartSpec spec;
  spec.id = "pipeline_overhead_vs_link";
  spec.title = "Overhead against link bandwidth";
  spec.x_label = "link_bandwidth_gbps";
  spec.y_label = "pipeline simulation overhead (fraction)";
  spec.log_x = spec.log_y = true;
  spec.series = {line("AttnRes overhead", {{3, 1.2},
                                           {6, 0.7},
                                           {12, 0.33},
                                           {25, 0.15},
                                           {50, 0.08},
                                           {100, 0.045},
                                           {200, 0.031},
                                           {400, 0.027},
                                           {800, 0.025}})};
  ChartSeries claim = line("claim: training overhead < 4%", {{3, 0.04}, {800, 0.04}});
  claim.style = ChartSeries::Style::line;
  spec.series.push_back(claim);
  spec.marker_x = 100;
  spec.marker_label = "scenario: link_bandwidth_gbps = 100";
  return spec;
}

// A 32-layer, P = 4, V = 2 interleaved schedule with m micro-batches.
PipelineReport pipeline_run(int microbatches) {
  PipelineSettings s;
  CostInputs in;
  in.layers = 32;
  in.block_size = 8;
  in.d_model = 2048;
  in.tokens = 4096;
  in.batch = 1;
  in.pp = 4;
  in.vpp = 2;
  s.model = resolve_cost_inputs(in);
  s.microbatches = microbatches;
  s.schedule = PipelineSchedule::interleaved;
  s.cache = CachePolicy::cached;
  s.hardware = load_hardware("h100");
  return evaluate_pipeline(s);
}

// Whether `image` has a pixel within `tolerance` (per channel) of `colour` inside `rect`.
bool has_colour(const QImage& image, const QRectF& rect, const QColor& colour, int tolerance) {
  const QRect r = rect.toAlignedRect().intersected(image.rect());
  for (int y = r.top(); y <= r.bottom(); ++y) {
    for (int x = r.left(); x <= r.right(); ++x) {
      const QColor c = image.pixelColor(x, y);
      if (std::abs(c.red() - colour.red()) <= tolerance &&
          std::abs(c.green() - colour.green()) <= tolerance &&
          std::abs(c.blue() - colour.blue()) <= tolerance) {
        return true;
      }
    }
  }
  return false;
}

// Whether `image` has a pixel of text inside `rect`: grey, darker than light grey (the series'
// swatches are in saturated colours).
bool has_text(const QImage& image, const QRectF& rect) {
  const QRect r = rect.toAlignedRect().intersected(image.rect());
  for (int y = r.top(); y <= r.bottom(); ++y) {
    for (int x = r.left(); x <= r.right(); ++x) {
      const QColor c = image.pixelColor(x, y);
      const int spread =
          std::max({c.red(), c.green(), c.blue()}) - std::min({c.red(), c.green(), c.blue()});
      if (spread <= 24 && qGray(c.rgb()) < 170) return true;
    }
  }
  return false;
}

double non_white_fraction(const QImage& image) {
  qint64 count = 0;
  for (int y = 0; y < image.height(); ++y) {
    for (int x = 0; x < image.width(); ++x)
      count += image.pixelColor(x, y) != QColor(Qt::white) ? 1 : 0;
  }
  return static_cast<double>(count) / (static_cast<double>(image.width()) * image.height());
}

// The pipeline view's memory chart (four short names, step curves).
ChartSpec memory_spec() {
  return pipeline_memory_chart(pipeline_run(8));
}

// The m = 64, P = 4, V = 2 interleaved schedule of the defect report: thousands of boxes.
ChartSpec big_gantt() {
  return pipeline_gantt_chart(pipeline_run(64));
}

// ---------------------------------------------------------------------------------------------
// The renderer: legend, log axes, marker readout (files and GUI alike).

TEST(ChartRender, FilesShowEveryLegendNameInFullAsPlainText) {
  TempDir dir;
  const ChartSpec spec = legend_spec();
  charts::render_chart_files(spec, dir / "legend.png", dir / "legend.svg");
  const std::string svg = read_text(dir / "legend.svg");
  EXPECT_NE(svg.find("claim: &lt; 0.04"), std::string::npos);
  EXPECT_NE(svg.find("AttnRes overhead @ link_bandwidth_gbps=100 (Block AttnRes, cached)"),
            std::string::npos);
  EXPECT_NE(svg.find("Block AttnRes two-phase, standard layout"), std::string::npos);
  EXPECT_NE(svg.find("I/O per sublayer &lt; 2x standard?"),
            std::string::npos);  // the title, rich text escaped
  QImage png;
  ASSERT_TRUE(png.load(QString::fromStdString((dir / "legend.png").string())));
  EXPECT_EQ(png.size(), QSize(960, 600));
  EXPECT_GT(non_white_fraction(png), 0.02);
}

// A linear axis across zero labels 0 as zero, not as the rounding error of min + k * step.
TEST(ChartRender, AnAxisAcrossZeroLabelsZeroExactly) {
  TempDir dir;
  ChartSpec spec;
  spec.id = "across_zero";
  spec.title = "differences";
  spec.x_label = "N";
  spec.y_label = "difference";
  spec.series = {{"mean", {{1, -0.17}, {2, -0.11}, {4, -0.12}, {8, -0.09}}},
                 {"zero", {{1, 0.0}, {8, 0.0}}, ChartSeries::Style::line}};
  charts::render_chart_files(spec, dir / "z.png", dir / "z.svg");
  const std::string svg = read_text(dir / "z.svg");
  EXPECT_EQ(svg.find("e-1"), std::string::npos);  // 2.77556e-17 and the like
  // Some tick is labelled exactly zero ("0", "0.0", "0.00", ...).
  EXPECT_TRUE(std::regex_search(svg, std::regex(">0(\\.0+)?</text>"))) << svg.substr(0, 4000);
}

TEST(ChartRender, LegendWrapsIntoRowsUnderThePlotInsteadOfTruncating) {
  ChartSpec spec = legend_spec();
  for (int i = 0; i < 4; ++i) {
    spec.series.push_back(line("AttnRes overhead @ link_bandwidth_gbps=" +
                                   std::to_string(25 * (i + 1)) + " with a long tail",
                               {{1.0, 2.0 + i}, {8.0, 3.0 + i}}));
  }
  LaidOut laid(spec, QSize(420, 340));
  const QStringList entries = charts::legend_entries(laid.chart);
  ASSERT_EQ(entries.size(), static_cast<qsizetype>(spec.series.size()));
  for (std::size_t i = 0; i < spec.series.size(); ++i) {
    EXPECT_EQ(entries[static_cast<qsizetype>(i)].toStdString(), spec.series[i].name);
  }
  const std::vector<QRectF> rects = charts::legend_entry_rects(laid.chart);
  const QRectF plot = laid.chart->plotArea();
  std::set<int> rows;
  for (std::size_t i = 0; i < rects.size(); ++i) {
    EXPECT_GE(rects[i].left(), 0.0) << i;
    EXPECT_LE(rects[i].right(), 420.0) << i;
    EXPECT_GT(rects[i].top(), plot.bottom()) << i;  // under the plot (and its axis labels)
    EXPECT_LE(rects[i].bottom(), 340.0) << i;
    rows.insert(static_cast<int>(std::lround(rects[i].top())));
    for (std::size_t j = 0; j < i; ++j)
      EXPECT_FALSE(rects[i].intersects(rects[j])) << i << " and " << j;
  }
  EXPECT_GE(rows.size(), 3u);
  EXPECT_GT(plot.height(), 60.0);  // the plot shrank but is still there
  // Qt's own legend (rich text, truncating) takes no room and paints nothing.
  EXPECT_LE(laid.chart->legend()->geometry().height(), 1.0);
  EXPECT_EQ(laid.chart->legend()->opacity(), 0.0);
}

TEST(ChartRender, LegendFollowsEntriesHiddenAfterBuilding) {
  ChartSpec spec = legend_spec();
  LaidOut laid(spec, QSize(600, 400));
  ASSERT_EQ(charts::legend_entries(laid.chart).size(), 4);
  const auto series = laid.chart->series();
  for (QLegendMarker* marker : laid.chart->legend()->markers(series[0])) marker->setVisible(false);
  EXPECT_EQ(charts::legend_entries(laid.chart).size(), 3);
  EXPECT_FALSE(charts::legend_entries(laid.chart).contains("standard residual"));
}

TEST(ChartRender, LogAxesLabelAtLeastThreeTicksAndStayLogarithmic) {
  ChartSpec spec;
  spec.title = "narrow";
  spec.log_x = spec.log_y = true;
  spec.series.push_back(line("rms", {{2, 1.6}, {3, 1.9}, {5, 2.1}, {9, 2.5}}));
  LaidOut laid(spec, QSize(600, 400));
  const QStringList x_ticks = charts::axis_tick_labels(laid.chart, Qt::Horizontal);
  const QStringList y_ticks = charts::axis_tick_labels(laid.chart, Qt::Vertical);
  EXPECT_GE(x_ticks.size(), 3) << x_ticks.join(" ").toStdString();
  EXPECT_GE(y_ticks.size(), 3) << y_ticks.join(" ").toStdString();
  EXPECT_TRUE(x_ticks.contains("2") && x_ticks.contains("5")) << x_ticks.join(" ").toStdString();
  // Logarithmic: equal ratios are equal distances, equal differences are not.
  QAbstractSeries* rms = laid.chart->series().front();
  const double x2 = charts::chart_position(laid.chart, {2, 2}, rms).x();
  const double x4 = charts::chart_position(laid.chart, {4, 2}, rms).x();
  const double x8 = charts::chart_position(laid.chart, {8, 2}, rms).x();
  const double x6 = charts::chart_position(laid.chart, {6, 2}, rms).x();
  EXPECT_NEAR(x4 - x2, x8 - x4, 0.5);
  EXPECT_GT((x4 - x2) - (x6 - x4), 10.0);
  const double y16 = charts::chart_position(laid.chart, {2, 1.6}, rms).y();
  const double y2 = charts::chart_position(laid.chart, {2, 2.0}, rms).y();
  const double y25 = charts::chart_position(laid.chart, {2, 2.5}, rms).y();
  EXPECT_NEAR(y16 - y2, y2 - y25, 0.5);  // 2 / 1.6 = 2.5 / 2
  // The data round-trip through the axes.
  const QPointF back =
      charts::chart_value(laid.chart, charts::chart_position(laid.chart, {3, 1.9}, rms), rms);
  EXPECT_NEAR(back.x(), 3.0, 1e-6);
  EXPECT_NEAR(back.y(), 1.9, 1e-6);
  EXPECT_NEAR(charts::series_point(laid.chart, rms, 2).x(), 5.0, 1e-9);

  // Wide ranges: decades; block counts: powers of two.
  ChartSpec wide = spec;
  wide.series = {line("a", {{1, 1}, {1000, 100}})};
  LaidOut wide_laid(wide, QSize(600, 400));
  const QStringList decades = charts::axis_tick_labels(wide_laid.chart, Qt::Horizontal);
  for (const char* label : {"1", "10", "100", "1000"})
    EXPECT_TRUE(decades.contains(label)) << label;
  ChartSpec blocks = spec;
  blocks.log_y = false;
  blocks.series = {line("a", {{1, 1}, {2, 2}, {4, 3}, {8, 4}, {16, 5}, {32, 6}})};
  LaidOut blocks_laid(blocks, QSize(600, 400));
  EXPECT_EQ(charts::axis_tick_labels(blocks_laid.chart, Qt::Horizontal),
            (QStringList{"1", "2", "4", "8", "16", "32"}));
}

TEST(ChartRender, MarkerReadoutShowsEachSeriesValueInterpolatedInTheAxisScale) {
  ChartSpec spec;
  spec.title = "marker";
  spec.x_label = "blocks N";
  spec.log_x = true;
  spec.series.push_back(line("linear in y", {{4, 10}, {16, 30}}));
  spec.series.push_back(line("exact point", {{4, 1}, {8, 2}, {16, 3}}));
  ChartSeries scatter = line("dots elsewhere", {{4, 15}, {16, 25}});
  scatter.style = ChartSeries::Style::scatter;
  spec.series.push_back(scatter);
  spec.marker_x = 8;
  spec.marker_label = "N = 8";
  LaidOut laid(spec, QSize(640, 420));
  // log x: 8 is half way between 4 and 16, so y = 20; the scatter has no point at 8.
  EXPECT_EQ(charts::marker_readout(laid.chart), (QStringList{"N = 8", "20", "2"}));
  EXPECT_FALSE(charts::legend_entries(laid.chart).contains("N = 8"));  // the box names the marker
  const QRectF box = charts::marker_readout_rect(laid.chart);
  const QRectF plot = laid.chart->plotArea();
  ASSERT_FALSE(box.isEmpty());
  EXPECT_TRUE(plot.contains(box)) << box.x() << "," << box.y() << " " << box.width() << "x"
                                  << box.height();
  QAbstractSeries* first = laid.chart->series().front();
  const double marker_x = charts::chart_position(laid.chart, {8, 0}, first).x();
  EXPECT_TRUE(box.right() < marker_x || box.left() > marker_x);  // beside the marker line
  for (std::size_t s = 0; s < spec.series.size(); ++s) {
    for (const auto& [x, y] : spec.series[s].points) {
      EXPECT_FALSE(box.contains(charts::chart_position(
          laid.chart, {x, y}, laid.chart->series()[static_cast<qsizetype>(s)])))
          << spec.series[s].name << " " << x;
    }
  }
  // The values are drawn: the box is not blank.
  const QImage image = laid.image();
  const QImage inside = image.copy(box.toAlignedRect().adjusted(2, 2, -2, -2));
  EXPECT_GT(non_white_fraction(inside), 0.03);

  // A log y axis interpolates log y: between 10 and 1000 half way is 100.
  ChartSpec log_y = spec;
  log_y.log_y = true;
  log_y.series = {line("geometric", {{4, 10}, {16, 1000}})};
  LaidOut log_laid(log_y, QSize(640, 420));
  EXPECT_EQ(charts::marker_readout(log_laid.chart), (QStringList{"N = 8", "100"}));
}

// ---------------------------------------------------------------------------------------------
// ChartPanel

TEST(ChartPanel, HoverShowsTheNearestPointsSeriesAndValues) {
  ChartPanel panel;
  panel.resize(560, 400);
  panel.show();
  ChartSpec spec = legend_spec();
  spec.log_x = true;
  panel.set_spec(spec);
  settle();
  const QPointF at = panel.point_position(1, 2);  // (4, 7) of the long-named series
  ASSERT_FALSE(at.isNull());
  const QString readout = panel.readout_at(at + QPointF(3, -2));
  EXPECT_TRUE(
      readout.startsWith("AttnRes overhead @ link_bandwidth_gbps=100 (Block AttnRes, cached)\n"))
      << readout.toStdString();
  EXPECT_TRUE(readout.contains("blocks N: 4")) << readout.toStdString();
  EXPECT_TRUE(readout.contains("I/O (x d): 7")) << readout.toStdString();
  EXPECT_EQ(panel.readout_at(QPointF(2, 2)), QString());  // far from every point

  QTest::mouseMove(panel.viewport(), at.toPoint());
  settle();
  EXPECT_EQ(panel.current_readout(), panel.readout_at(QPointF(at.toPoint())));
  EXPECT_FALSE(panel.current_readout().isEmpty());
  QTest::mouseMove(panel.viewport(), QPoint(2, 2));
  settle();
  EXPECT_TRUE(panel.current_readout().isEmpty());
}

TEST(ChartPanel, LegendGivesBackTheRoomOfEntriesAViewHides) {
  // As the training view does after set_spec: hide the legend entries of some series.
  ChartPanel panel;
  panel.resize(520, 380);
  panel.show();
  ChartSpec spec = legend_spec();
  for (int i = 0; i < 3; ++i)
    spec.series.push_back(
        line("validation dots of scheme number " + std::to_string(i), {{1, 2.0 + i}}));
  panel.set_spec(spec);
  settle();
  const int before = panel.chart()->margins().bottom();
  const double plot_before = panel.chart()->plotArea().height();
  const auto series = panel.chart()->series();
  for (qsizetype i = 4; i < 7; ++i) {
    for (QLegendMarker* marker : panel.chart()->legend()->markers(series[i]))
      marker->setVisible(false);
  }
  panel.grab();  // a paint notices the change and lays the legend out again
  settle();
  EXPECT_LT(panel.chart()->margins().bottom(), before);
  EXPECT_GT(panel.chart()->plotArea().height(), plot_before);
  EXPECT_EQ(charts::legend_entries(panel.chart()).size(), 4);
}

TEST(ChartPanel, ShrinksAndScalesItsTypeForPresentationMode) {
  FontScaleGuard guard;
  ChartPanel panel;
  EXPECT_LE(panel.minimumSizeHint().width(), 240);
  EXPECT_LE(panel.minimumSizeHint().height(), 160);
  EXPECT_LE(panel.minimumSize().width(), 240);
  EXPECT_LE(panel.minimumSize().height(), 160);
  panel.resize(600, 420);
  panel.set_spec(legend_spec());
  const double title = panel.chart()->titleFont().pointSizeF();
  const double legend = panel.chart()->legend()->font().pointSizeF();
  // A view restyles a series after set_spec; refresh() keeps that.
  auto* series = qobject_cast<QXYSeries*>(panel.chart()->series().front());
  ASSERT_NE(series, nullptr);
  series->setColor(QColor(200, 0, 0));
  set_chart_font_scale(1.5);
  EXPECT_DOUBLE_EQ(chart_font_scale(), 1.5);
  panel.refresh();
  EXPECT_NEAR(panel.chart()->titleFont().pointSizeF(), 1.5 * title, 0.01);
  EXPECT_NEAR(panel.chart()->legend()->font().pointSizeF(), 1.5 * legend, 0.01);
  for (QAbstractAxis* axis : panel.chart()->axes())
    EXPECT_GT(axis->labelsFont().pointSizeF(), 1.4 * 7.5 * 0.99);
  EXPECT_EQ(qobject_cast<QXYSeries*>(panel.chart()->series().front())->color(), QColor(200, 0, 0));
  // New panels take the scale from set_spec.
  ChartPanel other;
  other.resize(600, 420);
  other.set_spec(legend_spec());
  EXPECT_NEAR(other.chart()->titleFont().pointSizeF(), 1.5 * title, 0.01);

  // Small: the panel shrinks, its type down to 80 %, and the legend still lists every name.
  set_chart_font_scale(1.0);
  panel.resize(240, 160);
  panel.show();
  settle();
  EXPECT_EQ(panel.size(), QSize(240, 160));
  EXPECT_NEAR(panel.chart()->titleFont().pointSizeF(), 0.8 * title, 0.01);
  EXPECT_EQ(charts::legend_entries(panel.chart()).size(), 4);
  EXPECT_GT(panel.chart()->plotArea().height(), 20.0);
  // Even with presentation-size type.
  set_chart_font_scale(2.0);
  panel.refresh();
  panel.resize(240, 160);
  settle();
  EXPECT_EQ(panel.size(), QSize(240, 160));
}

// What a panel shows under its plot, checked against what Qt drew and against `image` (a grab of
// the panel): every series named (in full, or elided with at least three characters kept), each
// entry inside the chart, under the plot, apart from the others and from every text Qt drew
// (tick labels, axis titles), its swatch in the series' colour and its name in grey type; the x
// axis' tick labels and title drawn whole (Qt elides them with "..." when squeezed).
void expect_clear_legend(const ChartPanel& panel, const QImage& image, const std::string& what) {
  SCOPED_TRACE(what);
  const QChart* chart = panel.chart();
  ASSERT_NE(chart, nullptr);
  const ChartSpec& spec = panel.spec();
  const QRectF bounds(QPointF(0, 0), chart->size());
  EXPECT_EQ(chart->size().toSize(), panel.viewport()->size());
  const QRectF plot = chart->plotArea();
  EXPECT_GT(plot.height(), 20.0);
  const QStringList entries = charts::legend_entries(chart);
  const std::vector<QRectF> rects = charts::legend_entry_rects(chart);
  ASSERT_EQ(entries.size(), static_cast<qsizetype>(spec.series.size()));
  ASSERT_EQ(rects.size(), spec.series.size());
  const std::vector<charts::DrawnText> texts = charts::chart_texts(chart);
  const QRectF x_title = charts::axis_title_rect(chart, Qt::Horizontal);
  if (!x_title.isEmpty()) {
    EXPECT_GE(x_title.top(), plot.bottom() - 1);
  }
  const QTransform to_image = panel.viewportTransform();
  for (std::size_t i = 0; i < rects.size(); ++i) {
    const QString name = QString::fromStdString(spec.series[i].name);
    const QString entry = entries[static_cast<qsizetype>(i)];
    if (entry != name) {
      EXPECT_TRUE(entry.endsWith(QChar(0x2026)) && entry.size() >= 4 &&
                  name.startsWith(entry.chopped(1)))
          << entry.toStdString() << " for " << name.toStdString();
    }
    const QRectF r = rects[i];
    EXPECT_TRUE(bounds.adjusted(-0.5, -0.5, 0.5, 0.5).contains(r)) << entry.toStdString();
    EXPECT_FALSE(r.intersects(plot)) << entry.toStdString();
    EXPECT_FALSE(r.intersects(x_title)) << entry.toStdString();
    for (const auto& text : texts) {
      EXPECT_FALSE(r.intersects(text.rect))
          << entry.toStdString() << " over '" << text.text.toStdString() << "'";
    }
    for (std::size_t j = 0; j < i; ++j) EXPECT_FALSE(r.intersects(rects[j])) << i << " and " << j;
    // Drawn: the series' colour (its swatch) and dark type (its name) where the query says.
    const QRectF on_image = to_image.mapRect(chart->mapRectToScene(r));
    const auto* series = qobject_cast<const QXYSeries*>(chart->series()[static_cast<qsizetype>(i)]);
    ASSERT_NE(series, nullptr);
    EXPECT_TRUE(has_colour(image, on_image, series->color(), 24))
        << entry.toStdString() << " has no swatch";
    EXPECT_TRUE(has_text(image, on_image)) << entry.toStdString() << " has no name";
  }
  // The x axis under the plot: at least two tick labels, nothing elided.
  int x_labels = 0;
  for (const auto& text : texts) {
    if (text.rect.top() < plot.bottom() - 1)
      continue;  // the y axes' labels reach down to the plot's bottom
    EXPECT_FALSE(text.text.contains("...") || text.text.contains(QChar(0x2026)))
        << "'" << text.text.toStdString() << "'";
    bool number = false;
    text.text.toDouble(&number);
    x_labels += number ? 1 : 0;
  }
  EXPECT_GE(x_labels, 2);
}

TEST(ChartPanel, SmallPanelsNameEverySeriesClearOfTheXAxisRightAfterAResize) {
  // The 1024x700 windows: the cost explorer's four panels (about 330x190) showed no legend at
  // all, and in presentation mode the pipeline view's bottom panels drew the legend over the x
  // axis title. Both in the first paint after a resize or a restyle (what --screenshot grabs),
  // and then once Qt has caught up.
  FontScaleGuard guard;
  const std::vector<std::pair<std::string, ChartSpec>> specs = {
      {"cost-like", cost_like_spec()},
      {"overhead-like", overhead_like_spec()},
      {"memory", memory_spec()},
      {"long names", legend_spec()}};
  const std::vector<std::pair<double, QSize>> cases = {{1.0, QSize(330, 190)},
                                                       {1.4, QSize(330, 190)},
                                                       {1.4, QSize(240, 200)},
                                                       {1.4, QSize(490, 180)},
                                                       {1.0, QSize(240, 160)}};
  for (const auto& [name, spec] : specs) {
    for (const auto& [scale, size] : cases) {
      const std::string what = name + " at " + std::to_string(size.width()) + "x" +
                               std::to_string(size.height()) + ", type x" + std::to_string(scale);
      set_chart_font_scale(1.0);
      ChartPanel panel;
      panel.resize(640, 480);
      panel.set_spec(spec);
      panel.show();
      settle();
      // Presentation mode comes on, then the window lays the panel out small.
      set_chart_font_scale(scale);
      panel.refresh();
      panel.resize(size);
      ASSERT_EQ(panel.size(), size);
      const QImage at_once = panel.grab().toImage();  // no events in between, as --screenshot
      expect_clear_legend(panel, at_once, what + ", at once");
      settle();
      expect_clear_legend(panel, panel.grab().toImage(), what + ", settled");
      // A little smaller, at the same type (the window is resized): the plot, the x axis and the
      // legend move together, in the very next paint too.
      panel.resize(size - QSize(30, 20));
      expect_clear_legend(panel, panel.grab().toImage(), what + ", 30x20 smaller at once");
      settle();
      expect_clear_legend(panel, panel.grab().toImage(), what + ", 30x20 smaller, settled");
    }
  }
}

TEST(ChartPanel, ATooShortPanelDropsTheXAxisTitleBeforeTheNames) {
  FontScaleGuard guard;
  ChartPanel panel;
  panel.resize(640, 480);
  panel.set_spec(cost_like_spec());
  panel.show();
  settle();
  EXPECT_FALSE(
      charts::axis_title_rect(panel.chart(), Qt::Horizontal).isEmpty());  // room enough: shown
  set_chart_font_scale(1.4);
  panel.refresh();
  panel.resize(240, 160);
  settle();
  EXPECT_TRUE(charts::axis_title_rect(panel.chart(), Qt::Horizontal).isEmpty());
  expect_clear_legend(panel, panel.grab().toImage(), "cost-like at 240x160, type x1.4");
  // Back to a roomy panel: the title comes back, the names in full.
  set_chart_font_scale(1.0);
  panel.refresh();
  panel.resize(640, 480);
  settle();
  EXPECT_FALSE(charts::axis_title_rect(panel.chart(), Qt::Horizontal).isEmpty());
  const QStringList entries = charts::legend_entries(panel.chart());
  for (const auto& series : cost_like_spec().series)
    EXPECT_TRUE(entries.contains(QString::fromStdString(series.name)));
  expect_clear_legend(panel, panel.grab().toImage(), "cost-like at 640x480");
}

TEST(ChartPanel, HoveringAnElidedLegendEntryShowsTheFullName) {
  FontScaleGuard guard;
  set_chart_font_scale(1.4);
  ChartPanel panel;
  panel.resize(240, 200);
  panel.set_spec(legend_spec());
  panel.show();
  settle();
  const QStringList entries = charts::legend_entries(panel.chart());
  const std::vector<QRectF> rects = charts::legend_entry_rects(panel.chart());
  ASSERT_EQ(entries.size(), 4);
  qsizetype elided = -1;
  for (qsizetype i = 0; i < entries.size() && elided < 0; ++i)
    elided = entries[i].endsWith(QChar(0x2026)) ? i : -1;
  ASSERT_GE(elided, 0) << entries.join(" | ").toStdString();
  const QPointF at = panel.viewportTransform().map(
      panel.chart()->mapToScene(rects[static_cast<std::size_t>(elided)].center()));
  EXPECT_EQ(panel.readout_at(at).toStdString(),
            legend_spec().series[static_cast<std::size_t>(elided)].name);
  QTest::mouseMove(panel.viewport(), at.toPoint());
  settle();
  EXPECT_EQ(panel.current_readout().toStdString(),
            legend_spec().series[static_cast<std::size_t>(elided)].name);
}

TEST(ChartRender, FilesKeepTheXAxisTitleAndTheLegendApart) {
  for (const ChartSpec& spec : {legend_spec(), cost_like_spec(), overhead_like_spec()}) {
    LaidOut laid(spec, QSize(960, 600));
    const QRectF x_title = charts::axis_title_rect(laid.chart, Qt::Horizontal);
    ASSERT_FALSE(x_title.isEmpty()) << spec.title;
    EXPECT_EQ(charts::legend_entries(laid.chart).size(),
              static_cast<qsizetype>(spec.series.size()));
    for (const QRectF& r : charts::legend_entry_rects(laid.chart)) {
      EXPECT_GT(r.top(), x_title.bottom() - 0.5) << spec.title;
      EXPECT_LE(r.bottom(), 600.0) << spec.title;
    }
    for (const QString& entry : charts::legend_entries(laid.chart))
      EXPECT_FALSE(entry.endsWith(QChar(0x2026)));
  }
}

// ---------------------------------------------------------------------------------------------
// GanttWidget

TEST(GanttWidget, ZoomPanAndHoverAtSixtyFourMicroBatches) {
  const ChartSpec spec = big_gantt();
  ASSERT_GT(spec.boxes.size(), 1000u);
  GanttWidget gantt;
  EXPECT_LE(gantt.minimumSizeHint().width(), 240);
  EXPECT_LE(gantt.minimumSizeHint().height(), 160);
  gantt.resize(900, 320);
  gantt.set_spec(spec);
  gantt.show();
  settle();
  const double extent = charts::gantt_extent(spec);
  EXPECT_EQ(gantt.visible_range(), std::make_pair(0.0, extent));

  // A forward box of rank 0 in the middle of the iteration.
  std::size_t chosen = 0;
  double best = 1e300;
  for (std::size_t i = 0; i < spec.boxes.size(); ++i) {
    const auto& box = spec.boxes[i];
    const double distance = std::abs((box.x0 + box.x1) / 2 - extent / 2);
    if (box.lane == 0 && box.category == GanttCategory::forward && distance < best) {
      best = distance;
      chosen = i;
    }
  }
  const QRectF before = gantt.box_rect(chosen);
  EXPECT_LT(before.width(), 4.0);  // a sliver at full width: why zoom is needed

  // Wheel: five notches in around the box.
  QWheelEvent wheel(before.center(), gantt.mapToGlobal(before.center()), QPoint(), QPoint(0, 600),
                    Qt::NoButton, Qt::NoModifier, Qt::NoScrollPhase, false);
  QApplication::sendEvent(&gantt, &wheel);
  const auto [start1, end1] = gantt.visible_range();
  EXPECT_NEAR(extent / (end1 - start1), std::pow(1.0015, 600), 0.01);
  const QRectF zoomed = gantt.box_rect(chosen);
  EXPECT_NEAR(zoomed.width() / before.width(), std::pow(1.0015, 600), 0.05);
  EXPECT_NEAR(zoomed.center().x(), before.center().x(), 2.0);  // zoomed around the cursor

  // Keys: + zooms further around the pointer (or the middle), 0 shows everything again.
  gantt.setFocus();
  QTest::mouseMove(&gantt, zoomed.center().toPoint());
  QTest::keyClick(&gantt, Qt::Key_Plus);
  QTest::keyClick(&gantt, Qt::Key_Plus);
  QTest::keyClick(&gantt, Qt::Key_Plus);
  const auto [start2, end2] = gantt.visible_range();
  EXPECT_NEAR((end1 - start1) / (end2 - start2), 1.5 * 1.5 * 1.5, 1e-6);
  EXPECT_NEAR(gantt.box_rect(chosen).center().x(), zoomed.center().x(), 2.0);
  gantt.zoom_at(4.0, gantt.box_rect(chosen).center().x());
  const QRectF close_up = gantt.box_rect(chosen);
  EXPECT_GT(close_up.width(), 20.0);

  // Hover readout at zoom: lane, category, the box's label, start and end.
  const QString readout = gantt.readout_at(close_up.center());
  EXPECT_TRUE(readout.startsWith("rank 0 - forward\n")) << readout.toStdString();
  EXPECT_TRUE(readout.contains(QString::fromStdString(spec.boxes[chosen].label)))
      << readout.toStdString();
  EXPECT_TRUE(readout.contains(QString::number(spec.boxes[chosen].x0, 'f', 2).left(5)))
      << readout.toStdString();
  EXPECT_EQ(gantt.box_at(close_up.center()), static_cast<int>(chosen));
  QTest::mouseMove(&gantt, close_up.center().toPoint());
  settle();
  EXPECT_EQ(gantt.current_readout(), gantt.readout_at(QPointF(close_up.center().toPoint())));
  EXPECT_EQ(gantt.readout_at(QPointF(2, 2)), QString());

  // Dragging left by 100 px shows later times.
  const auto [start3, end3] = gantt.visible_range();
  const charts::GanttLayout layout = [&, start3 = start3, end3 = end3] {
    charts::GanttView view;
    view.start = start3;
    view.end = end3;
    return charts::gantt_layout(spec, QRectF(gantt.rect()), view);
  }();
  const QPoint from = layout.plot.center().toPoint();
  QTest::mousePress(&gantt, Qt::LeftButton, Qt::NoModifier, from);
  QTest::mouseMove(&gantt, from - QPoint(100, 0));
  QTest::mouseRelease(&gantt, Qt::LeftButton, Qt::NoModifier, from - QPoint(100, 0));
  const auto [start4, end4] = gantt.visible_range();
  EXPECT_NEAR(start4 - start3, 100.0 / layout.plot.width() * (end3 - start3),
              0.02 * (end3 - start3));
  EXPECT_NEAR(end4 - start4, end3 - start3, 1e-9 * extent);

  QTest::keyClick(&gantt, Qt::Key_0);
  EXPECT_EQ(gantt.visible_range(), std::make_pair(0.0, extent));
  gantt.zoom_at(3.0, 300);
  EXPECT_LT(gantt.visible_range().second - gantt.visible_range().first, extent);
  QTest::mouseDClick(&gantt, Qt::LeftButton, Qt::NoModifier, QPoint(300, 100));
  EXPECT_EQ(gantt.visible_range(), std::make_pair(0.0, extent));
}

// The fraction of coloured pixels in rank 0's compute band that are exactly a category's colour
// (separators or antialiasing would blend them into grey).
double pure_colour_fraction(const QImage& image, const QRectF& band, double* forward,
                            double* backward) {
  const QColor colours[] = {QColor(76, 114, 176), QColor(221, 132, 82)};
  qint64 coloured = 0, pure = 0, f = 0, b = 0;
  for (int y = static_cast<int>(std::ceil(band.top())) + 1; y < static_cast<int>(band.bottom()) - 1;
       ++y) {
    for (int x = static_cast<int>(std::ceil(band.left())) + 1;
         x < static_cast<int>(band.right()) - 1; ++x) {
      const QColor pixel = image.pixelColor(x, y);
      if (pixel == QColor(Qt::white)) continue;
      ++coloured;
      if (pixel == colours[0]) ++f;
      if (pixel == colours[1]) ++b;
    }
  }
  pure = f + b;
  const auto all = static_cast<double>(std::max<qint64>(1, coloured));
  *forward = static_cast<double>(f) / all;
  *backward = static_cast<double>(b) / all;
  return static_cast<double>(pure) / all;
}

TEST(GanttWidget, ThousandsOfBoxesKeepTheirColoursInFilesAndOnScreen) {
  const ChartSpec spec = big_gantt();
  // The file renderer's picture (what render_chart_files paints).
  const QSize size(1200, 300);
  QImage image(size, QImage::Format_ARGB32);
  image.fill(Qt::white);
  {
    QPainter painter(&image);
    painter.setRenderHint(QPainter::Antialiasing);
    charts::paint_gantt(painter, spec, QRectF(QPointF(0, 0), QSizeF(size)));
  }
  const charts::GanttLayout layout =
      charts::gantt_layout(spec, QRectF(QPointF(0, 0), QSizeF(size)));
  ChartBox lane0;
  lane0.x0 = 0;
  lane0.x1 = charts::gantt_extent(spec);
  lane0.lane = 0;
  lane0.category = GanttCategory::forward;
  double forward = 0, backward = 0;
  EXPECT_GT(pure_colour_fraction(image, layout.box_rect(lane0), &forward, &backward), 0.97);
  EXPECT_GT(forward, 0.2);
  EXPECT_GT(backward, 0.2);

  // The widget, zoomed in: boxes wide enough for separators and their micro-batch numbers.
  GanttWidget gantt;
  gantt.resize(900, 300);
  gantt.set_spec(spec);
  gantt.zoom_at(16.0, 450);
  const QImage zoomed = gantt.grab().toImage();
  EXPECT_GT(non_white_fraction(zoomed), 0.1);

  TempDir dir;
  charts::render_chart_files(spec, dir / "gantt.png", dir / "gantt.svg");
  QImage png;
  ASSERT_TRUE(png.load(QString::fromStdString((dir / "gantt.png").string())));
  EXPECT_GT(non_white_fraction(png), 0.1);
  EXPECT_NE(read_text(dir / "gantt.svg").find("rank 3"), std::string::npos);
}

TEST(GanttWidget, PresentationScaleEnlargesTheType) {
  FontScaleGuard guard;
  const ChartSpec spec = big_gantt();
  const QRectF area(0, 0, 900, 320);
  charts::GanttView normal;
  charts::GanttView large;
  large.font_scale = 1.6;
  const auto small_type = charts::gantt_layout(spec, area, normal);
  const auto large_type = charts::gantt_layout(spec, area, large);
  EXPECT_LT(large_type.plot.height(), small_type.plot.height());  // more room for larger labels
  EXPECT_GT(large_type.plot.left(), small_type.plot.left());      // wider lane names
  GanttWidget gantt;
  gantt.resize(900, 320);
  gantt.set_spec(spec);
  const double lanes_before = gantt.box_rect(0).height();
  set_chart_font_scale(1.6);
  EXPECT_LT(gantt.box_rect(0).height(), lanes_before);
}

// ---------------------------------------------------------------------------------------------
// HeatmapWidget

std::vector<std::vector<double>> ramp(int rows, int cols) {
  std::vector<std::vector<double>> values(static_cast<std::size_t>(rows),
                                          std::vector<double>(static_cast<std::size_t>(cols)));
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c)
      values[static_cast<std::size_t>(r)][static_cast<std::size_t>(c)] =
          (r + c) / double(rows + cols);
  }
  return values;
}

std::vector<std::string> names(const std::string& prefix, int n) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) out.push_back(prefix + std::to_string(i));
  return out;
}

void expect_labels_apart(const HeatmapWidget& map) {
  const std::vector<int> rows = map.drawn_row_labels();
  ASSERT_FALSE(rows.empty());
  for (std::size_t i = 1; i < rows.size(); ++i) {
    const QRectF a = map.row_label_rect(rows[i - 1]), b = map.row_label_rect(rows[i]);
    EXPECT_LE(a.bottom(), b.top() + 0.01) << rows[i - 1] << " and " << rows[i];
  }
  const std::vector<int> cols = map.drawn_column_labels();
  ASSERT_FALSE(cols.empty());
  for (std::size_t i = 1; i < cols.size(); ++i) {
    // 45-degree labels: a line height apart perpendicular to the text, so sqrt(2) lines apart in x.
    const double dx = map.cell_center(0, cols[i]).x() - map.cell_center(0, cols[i - 1]).x();
    EXPECT_GE(dx * std::sqrt(0.5), map.row_label_rect(rows.front()).height() - 0.01);
  }
}

TEST(HeatmapWidget, ThinsLabelsAndShrinksGracefully) {
  FontScaleGuard guard;
  HeatmapWidget map;
  EXPECT_LE(map.minimumSizeHint().width(), 220);
  EXPECT_LE(map.minimumSizeHint().height(), 160);
  EXPECT_LE(map.minimumSize().width(), 220);
  EXPECT_LE(map.minimumSize().height(), 160);
  map.set_data("alpha of Block AttnRes (S = 2), step 150 (mean over a validation window)",
               ramp(48, 48), names("sublayer ", 48), names("source ", 48));
  for (const QSize size : {QSize(460, 380), QSize(300, 240), QSize(220, 160)}) {
    map.resize(size);
    SCOPED_TRACE(std::to_string(size.width()) + "x" + std::to_string(size.height()));
    expect_labels_apart(map);
    const std::vector<int> rows = map.drawn_row_labels();
    EXPECT_LT(rows.size(), 48u);
    EXPECT_GE(rows.size(), 2u);
    // Cells, colour bar and title all fit.
    const QRectF cells = map.cells_rect(), bar = map.colour_bar_rect();
    EXPECT_GT(cells.height(), 0.35 * size.height());
    EXPECT_GT(cells.width(), 0.35 * size.width());
    EXPECT_LE(bar.right(), size.width());
    EXPECT_GE(bar.height(), cells.height() - 0.01);
    const QImage image = map.grab().toImage();
    EXPECT_EQ(image.size(), size);
    // A cell's colour is where cell_center says.
    const QColor pixel = image.pixelColor(map.cell_center(47, 47).toPoint());
    const Rgb expected = viridis(94.0 / 96.0);
    EXPECT_NEAR(pixel.red(), expected.r, 1);
    EXPECT_NEAR(pixel.green(), expected.g, 1);
  }
  // Few rows in a roomy widget: every label.
  map.set_data("small", ramp(4, 5), names("r", 4), names("c", 5));
  map.resize(460, 380);
  EXPECT_EQ(map.drawn_row_labels(), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(map.drawn_column_labels(), (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(map.readout_at(map.cell_center(1, 2)), "r1 <- c2: 0.333333");

  // Presentation mode: larger labels, so fewer of them at 48 rows.
  map.set_data("big", ramp(48, 48), names("sublayer ", 48), names("source ", 48));
  const std::size_t normal = map.drawn_row_labels().size();
  set_chart_font_scale(2.0);
  EXPECT_LT(map.drawn_row_labels().size(), normal);
  expect_labels_apart(map);
}

}  // namespace
}  // namespace attnres::gui

int main(int argc, char** argv) {
  qputenv("QT_QPA_PLATFORM", "offscreen");  // before the application exists
  if (qEnvironmentVariableIsEmpty("XDG_RUNTIME_DIR")) {
    // A private runtime directory: Qt's warning about a missing one would otherwise reach the
    // test listing that CTest reads.
    const QString runtime = QDir::tempPath() + "/attnres-runtime-" + QString::number(getuid());
    QDir().mkpath(runtime);
    QFile::setPermissions(runtime, QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner);
    qputenv("XDG_RUNTIME_DIR", runtime.toUtf8());
  }
  QApplication app(argc, argv);  // on the stack: destroyed before QTest's static devices
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
