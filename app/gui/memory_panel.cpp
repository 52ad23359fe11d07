// The cost explorer's Memory tab: stacked bars of the memory per pipeline rank against the
// device's capacity, the largest rank's verdict, the table and the assumptions (docs/math.md
// §3.7). Every number comes from the core (rank_memory.hpp) and the table from the report's
// memory_table, so the tab shows what `attnres memory` prints.
#include "memory_panel.hpp"

#include <QBarCategoryAxis>
#include <QBarSet>
#include <QChart>
#include <QComboBox>
#include <QCursor>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLegend>
#include <QLineSeries>
#include <QStackedBarSeries>
#include <QTableView>
#include <QToolTip>
#include <QVBoxLayout>
#include <QValueAxis>
#include <algorithm>
#include <array>
#include <cmath>

#include "attnres/format.hpp"
#include "view_kit.hpp"

namespace attnres::gui {

namespace {

QString text_of(const std::string& text) {
  return QString::fromStdString(text);
}

// "weights (GB)" -> "weights": the legend names the component, the axis gives the unit.
QString component_name(const std::string& header) {
  const std::string suffix = " (GB)";
  if (header.size() > suffix.size() &&
      header.compare(header.size() - suffix.size(), suffix.size(), suffix) == 0)
    return text_of(header.substr(0, header.size() - suffix.size()));
  return text_of(header);
}

QString gigabytes(double bytes) {
  return text_of(format_number(std::round(bytes / 1e7) / 100)) + " GB";
}

// One colour per component column, in table order (weights, gradients, optimizer, activations,
// AttnRes history, KV cache), so that a hidden empty component never shifts the others'.
constexpr std::array<const char*, 6> kComponentColours = {"#4e79a7", "#f28e2b", "#59a14f",
                                                          "#e15759", "#b07aa1", "#76b7b2"};

void scale_font(QFont& font, double scale) {
  if (font.pointSizeF() > 0) {
    font.setPointSizeF(font.pointSizeF() * scale);
  } else if (font.pixelSize() > 0) {
    font.setPixelSize(std::max(1, static_cast<int>(std::lround(font.pixelSize() * scale))));
  }
}

}  // namespace

// ------------------------------------------------------------------ chart

MemoryChart::MemoryChart(QWidget* parent) : ChartPanel(parent) {
  setMinimumSize(240, 180);
}

void MemoryChart::set_result(const MemoryResult& result) {
  const ReportTable& table = result.table;
  // The component columns: after the rank, up to the total.
  std::size_t total_column = 0;
  while (total_column < table.columns.size() && table.columns[total_column].key != "total_bytes")
    ++total_column;
  // The ranks drawn: all of them, or every k-th and the largest.
  const std::size_t count = result.ranks.size();
  drawn_.clear();
  if (count <= kMaxBars) {
    for (std::size_t i = 0; i < count; ++i) drawn_.push_back(static_cast<int>(i));
  } else {
    const std::size_t stride = (count + kMaxBars - 2) / (kMaxBars - 1);
    for (std::size_t i = 0; i < count; i += stride) drawn_.push_back(static_cast<int>(i));
    drawn_.push_back(result.peak.rank);
    std::sort(drawn_.begin(), drawn_.end());
    drawn_.erase(std::unique(drawn_.begin(), drawn_.end()), drawn_.end());
  }
  const double scale = chart_font_scale();
  auto* chart = new QChart;
  chart->setAnimationOptions(QChart::NoAnimation);
  chart->setMargins(QMargins(4, 4, 4, 4));
  chart->setBackgroundRoundness(0);
  auto* bars = new QStackedBarSeries;
  bars->setBarWidth(0.7);
  for (std::size_t column = 1; column < total_column; ++column) {
    std::vector<double> values;
    bool any = false;
    for (const int rank : drawn_) {
      const auto& cell = table.values[static_cast<std::size_t>(rank)][column];
      const double gb = cell.is_number() ? cell.get<double>() / 1e9 : 0.0;
      any = any || gb > 0;
      values.push_back(gb);
    }
    if (!any) continue;  // training has no KV cache, inference no gradients: no empty entries
    auto* set = new QBarSet(component_name(table.header[column]));
    const QColor colour(kComponentColours[(column - 1) % kComponentColours.size()]);
    set->setColor(colour);
    set->setBorderColor(colour.darker(115));
    for (const double v : values) set->append(v);
    bars->append(set);
  }
  chart->addSeries(bars);
  QStringList categories;
  for (const int rank : drawn_) categories << QString::number(rank);
  auto* x = new QBarCategoryAxis;
  x->append(categories);
  x->setTitleText(count > drawn_.size()
                      ? QString("pipeline rank (%1 of %2 shown)").arg(drawn_.size()).arg(count)
                      : QString("pipeline rank"));
  auto* y = new QValueAxis;
  y->setTitleText("GB per GPU");
  y->setLabelFormat("%.0f");
  const double capacity = result.peak.capacity;
  const double top = std::max(result.peak.total(), capacity) / 1e9;
  y->setRange(0, top > 0 ? top * 1.08 : 1.0);
  y->applyNiceNumbers();
  chart->addAxis(x, Qt::AlignBottom);
  chart->addAxis(y, Qt::AlignLeft);
  bars->attachAxis(x);
  bars->attachAxis(y);
  if (result.peak.known_capacity()) {
    // The capacity across every bar, on a hidden x axis over the categories' span.
    auto* line = new QLineSeries;
    line->setName("capacity " + gigabytes(capacity));
    const double right = static_cast<double>(drawn_.size()) - 0.5;
    line->append(-0.5, capacity / 1e9);
    line->append(right, capacity / 1e9);
    QPen pen(QColor("#202020"));
    pen.setWidthF(2.0);
    pen.setStyle(Qt::DashLine);
    line->setPen(pen);
    chart->addSeries(line);
    auto* span = new QValueAxis;
    span->setRange(-0.5, right);
    span->setVisible(false);
    chart->addAxis(span, Qt::AlignBottom);
    line->attachAxis(span);
    line->attachAxis(y);
  }
  chart->setTitle("Memory per rank on " + text_of(result.hardware) + " (docs/math.md §3.7)");
  QFont title = chart->titleFont();
  scale_font(title, scale);
  title.setBold(true);
  chart->setTitleFont(title);
  for (QAbstractAxis* axis : chart->axes()) {
    QFont labels = axis->labelsFont(), titles = axis->titleFont();
    scale_font(labels, scale);
    scale_font(titles, scale);
    axis->setLabelsFont(labels);
    axis->setTitleFont(titles);
  }
  // The legend on the right, one entry a line: six names never squeeze into a row of a narrow
  // page.
  chart->legend()->setAlignment(Qt::AlignRight);
  QFont legend = chart->legend()->font();
  scale_font(legend, scale);
  chart->legend()->setFont(legend);
  QObject::connect(bars, &QStackedBarSeries::hovered, this,
                   [this, ranks = result.ranks](bool status, int index, QBarSet* set) {
                     if (!status || index < 0 || index >= static_cast<int>(drawn_.size())) {
                       QToolTip::hideText();
                       return;
                     }
                     const RankMemory& m = ranks[static_cast<std::size_t>(drawn_[index])];
                     QToolTip::showText(QCursor::pos(),
                                        QString("rank %1: %2 %3 GB of %4 total")
                                            .arg(m.rank)
                                            .arg(set->label())
                                            .arg(set->at(index), 0, 'f', 2)
                                            .arg(gigabytes(m.total())),
                                        this);
                   });
  QChart* old = this->chart();
  setChart(chart);
  if (old) old->deleteLater();
}

void MemoryChart::mouseMoveEvent(QMouseEvent* event) {
  // The bars report their own hover (tooltips); the xy readout of ChartPanel has no spec here.
  QChartView::mouseMoveEvent(event);
}

// ------------------------------------------------------------------ panel

MemoryPanel::MemoryPanel(QWidget* parent) : QWidget(parent) {
  setObjectName("memory_tab");
  auto* column = new QVBoxLayout(this);
  column->setContentsMargins(4, 4, 4, 4);
  auto* top = new QHBoxLayout;
  workload_ = new QComboBox;
  workload_->setObjectName("memory_workload");
  for (const auto& entry : kWorkloadNames)
    workload_->addItem(QString::fromUtf8(entry.name.data(), static_cast<int>(entry.name.size())));
  workload_->setToolTip(
      "training: weights, gradients, optimizer states and the activations of the micro-batches "
      "in flight; inference: weights and the KV cache (docs/math.md §3.7)");
  auto* workload_label = new QLabel("workload");
  workload_label->setBuddy(workload_);
  top->addWidget(workload_label);
  top->addWidget(workload_);
  top->addStretch(1);
  column->addLayout(top);
  verdict_ = new QLabel;
  verdict_->setObjectName("memory_verdict");
  verdict_->setWordWrap(true);
  verdict_->setTextFormat(Qt::PlainText);
  verdict_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  QFont bold = verdict_->font();
  bold.setBold(true);
  verdict_->setFont(bold);
  column->addWidget(verdict_);
  chart_ = new MemoryChart;
  chart_->setObjectName("memory_chart");
  column->addWidget(chart_, 4);
  table_ = new QTableView;
  model_ = new ReportTableModel(table_);
  table_->setModel(model_);
  table_->setObjectName("memory_table");
  table_->verticalHeader()->setVisible(false);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setMinimumHeight(90);
  table_->verticalHeader()->setDefaultSectionSize(table_->fontMetrics().height() + 6);
  column->addWidget(table_, 2);
  assumptions_ = new QLabel;
  assumptions_->setObjectName("memory_assumptions");
  assumptions_->setWordWrap(true);
  assumptions_->setTextFormat(Qt::PlainText);
  assumptions_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  column->addWidget(assumptions_);
}

Workload MemoryPanel::workload() const {
  return parse_enum(kWorkloadNames, workload_->currentText().toStdString(), "workload",
                    "unknown workload");
}

void MemoryPanel::set_result(MemoryResult result) {
  result_ = std::move(result);
  const RankMemory& peak = result_.peak;
  const QString verdict = text_of(fit_verdict(peak));
  // Labelled as the closed form it is: the Decision tab and the Pipeline view show the simulated
  // schedule's peak, another figure (explorer_results.hpp).
  verdict_->setText(QString("Rank %1 (the largest of %2), %3: %4")
                        .arg(peak.rank)
                        .arg(result_.ranks.size())
                        .arg(QString::fromUtf8(kAnalyticMemory))
                        .arg(verdict));
  const char* style = !peak.known_capacity() ? kUnknownStyle : peak.fits() ? kGoodStyle : kBadStyle;
  verdict_->setStyleSheet(style);
  verdict_->setToolTip(
      "The largest rank against the hardware preset's device memory (docs/math.md §3.7)");
  chart_->set_result(result_);
  const ReportTable& t = result_.table;
  table_->setToolTip(text_of(t.title));
  model_->set_table(t);  // the rows as `attnres memory` prints them (ReportTableModel)
  table_->resizeColumnsToContents();
  QString text = "Assumptions (docs/math.md §3.7):";
  for (const auto& line : result_.assumptions) text += "\n• " + text_of(line);
  assumptions_->setText(text);
}

}  // namespace attnres::gui
