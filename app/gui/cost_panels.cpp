#include "cost_panels.hpp"

#include <QBrush>
#include <QColor>
#include <QFont>
#include <QHeaderView>
#include <QLabel>
#include <QPainter>
#include <QScatterSeries>
#include <QScrollBar>
#include <QSplitter>
#include <QTableWidget>
#include <QVBoxLayout>
#include <QtCharts/QChart>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <set>
#include <utility>

#include "attnres/format.hpp"
#include "attnres/strategy_report.hpp"
#include "attnres/time_model.hpp"

namespace attnres::gui {

namespace {

QString qstr(const std::string& text) {
  return QString::fromStdString(text);
}

// Three significant figures without exponents for the sizes a table shows (12345, 12.3, 0.0123).
QString compact(double value) {
  if (!std::isfinite(value)) return "–";
  const double a = std::abs(value);
  char text[48];
  if (a == 0) return "0";
  if (a >= 100) {
    std::snprintf(text, sizeof text, "%.0f", value);
  } else if (a >= 10) {
    std::snprintf(text, sizeof text, "%.1f", value);
  } else if (a >= 1) {
    std::snprintf(text, sizeof text, "%.2f", value);
  } else {
    std::snprintf(text, sizeof text, "%.3g", value);
  }
  return QString::fromLatin1(text);
}

QString percent(double fraction) {
  char text[48];
  // One decimal; two significant digits for the small shares decode steps have.
  const double value = fraction * 100;
  std::snprintf(text, sizeof text, std::abs(value) < 0.1 && value != 0 ? "%.2g" : "%.1f", value);
  return QString::fromLatin1(text);
}

QLabel* caption(const QString& html) {
  auto* label = new QLabel(html);
  label->setWordWrap(true);
  label->setTextFormat(Qt::RichText);
  return label;
}

QTableWidget* compact_table(const QStringList& headers) {
  auto* table = new QTableWidget;
  table->setColumnCount(static_cast<int>(headers.size()));
  table->setHorizontalHeaderLabels(headers);
  table->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table->setSelectionMode(QAbstractItemView::NoSelection);
  table->setWordWrap(false);
  table->verticalHeader()->setDefaultSectionSize(table->fontMetrics().height() + 6);
  table->horizontalHeader()->setSectionResizeMode(QHeaderView::Interactive);
  return table;
}

void header_tip(QTableWidget* table, int column, const QString& tip) {
  if (QTableWidgetItem* item = table->horizontalHeaderItem(column)) item->setToolTip(tip);
}

QString mode_name(ResidualMode mode) {
  return mode == ResidualMode::full ? "Full" : "Block";
}

// How a calibration point's quantity reads: a call in µs, an overhead as a signed percentage.
QString quantity_text(CalibrationQuantity quantity, double value) {
  char text[48];
  if (quantity == CalibrationQuantity::call_seconds) {
    std::snprintf(text, sizeof text, "%.3g µs", value * 1e6);
  } else {
    std::snprintf(text, sizeof text, "%+.1f %%", value * 100);
  }
  return QString::fromUtf8(text);
}

}  // namespace

// ------------------------------------------------------------------ strategies

namespace {

// The two tables' columns: bytes and memory per micro-batch; launches and time.
enum BytesColumn { kForwardRead, kForwardWrite, kBackwardRead, kBackwardWrite, kTemp, kSaved };
enum TimeColumn { kLaunches, kTrainMs, kTrainPercent, kDecodeUs, kDecodePercent };

// A table as tall as its rows (no empty space under them, no vertical scroll bar).
void fit_height(QTableWidget* table) {
  int height = table->horizontalHeader()->sizeHint().height() + 2 * table->frameWidth();
  for (int r = 0; r < table->rowCount(); ++r) height += table->rowHeight(r);
  // Room for the horizontal scroll bar when the columns are wider than the table.
  const int needed = table->verticalHeader()->width() + table->horizontalHeader()->length() +
                     2 * table->frameWidth();
  if (needed > table->width()) height += table->horizontalScrollBar()->sizeHint().height();
  table->setFixedHeight(height);
}

}  // namespace

StrategyPanel::StrategyPanel(QWidget* parent) : QWidget(parent) {
  setObjectName("strategies_tab");
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  layout->addWidget(caption(
      "<b>Implementation strategies</b> of the depth read for these inputs (docs/math.md §3.6): "
      "what each pass moves and keeps, per micro-batch of B·T tokens, then launches and time on "
      "the chosen hardware. The strategy picked on the left is highlighted; hover a row for its "
      "counts in vectors."));
  bytes_ = compact_table({});
  bytes_->setObjectName("strategy_comparison");
  bytes_->setColumnCount(6);
  bytes_->setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  layout->addWidget(bytes_);
  time_ = compact_table({});
  time_->setObjectName("strategy_time");
  time_->setColumnCount(5);
  time_->setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  layout->addWidget(time_);
  summary_ = caption("");
  summary_->setObjectName("strategy_summary");
  summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  layout->addWidget(summary_);
  layout->addStretch(1);
}

void StrategyPanel::resizeEvent(QResizeEvent* event) {
  QWidget::resizeEvent(event);
  fit_height(bytes_);
  fit_height(time_);
}

void StrategyPanel::set_comparison(StrategyComparison comparison) {
  comparison_ = std::move(comparison);
  fill();
}

void StrategyPanel::highlight(Strategy strategy) {
  highlighted_ = strategy;
  fill();
}

void StrategyPanel::fill() {
  const StrategyComparison& c = comparison_;
  // One unit for every byte column: MB up to 100 GB in the largest cell, else GB.
  double largest = 0;
  for (const auto& row : c.rows) {
    for (const std::int64_t v :
         {row.forward.read_vectors, row.forward.write_vectors, row.backward.read_vectors,
          row.backward.write_vectors, row.saved_vectors})
      largest = std::max(largest, static_cast<double>(v) * c.vector_bytes);
  }
  unit_ = largest < 1e11 ? "MB" : "GB";
  const double scale = unit_ == "MB" ? 1e6 : 1e9;
  bytes_->setHorizontalHeaderLabels({"fwd read\n" + unit_, "fwd write\n" + unit_,
                                     "bwd read\n" + unit_, "bwd write\n" + unit_, "temp\n" + unit_,
                                     "saved\n" + unit_});
  time_->setHorizontalHeaderLabels(
      {"launches\nfwd / bwd", "train step\nms", "train\n+ %", "decode\nµs", "decode\n+ %"});
  const QString per = "per micro-batch (vectors × d × B·T × b), in " + unit_;
  header_tip(bytes_, kForwardRead, "Forward pass: bytes read " + per);
  header_tip(bytes_, kForwardWrite, "Forward pass: bytes written " + per);
  header_tip(bytes_, kBackwardRead, "Backward pass: bytes read " + per);
  header_tip(bytes_, kBackwardWrite, "Backward pass: bytes written " + per);
  header_tip(bytes_, kTemp,
             "Peak transient memory of one read (the larger of forward and backward) " + per);
  header_tip(bytes_, kSaved,
             "Tensors kept for the backward beyond the stored history (stack: stacked sources and "
             "normalised keys; arena: keys; two-phase: phase-1 results; one-shot: none) " +
                 per);
  header_tip(time_, kLaunches, "Kernel launches of the forward and of the backward pass");
  header_tip(time_, kTrainMs,
             "Time of the mechanism in one training step (prefill forward + backward, B·T tokens "
             "per call) on the chosen hardware: per call max(kernel floor, bytes / bandwidth)");
  header_tip(time_, kTrainPercent,
             "Training-step overhead against the same model with the standard residual, in % of "
             "its step time (backward = 2 × forward)");
  header_tip(
      time_, kDecodeUs,
      "Time of the mechanism in one decode step (one token per sequence, B tokens per call)");
  header_tip(time_, kDecodePercent,
             "Decode-step overhead against the standard residual, in % of the model's decode step");
  bytes_->setRowCount(static_cast<int>(c.rows.size()));
  time_->setRowCount(static_cast<int>(c.rows.size()));
  const QColor highlight(255, 232, 160);
  for (std::size_t i = 0; i < c.rows.size(); ++i) {
    const auto& row = c.rows[i];
    const int r = static_cast<int>(i);
    const bool picked = row.strategy == highlighted_;
    const QString name = mode_name(row.mode) + " · " + qstr(to_string(row.strategy));
    QFont font = bytes_->font();
    font.setBold(picked);
    auto mb = [&](std::int64_t vectors) {
      return compact(static_cast<double>(vectors) * c.vector_bytes / scale);
    };
    const QString tip =
        name + " — " + qstr(strategy_summary(row.strategy)) +
        QString(
            "\nvectors per token: forward %1 read, %2 written; backward %3 read, %4 written; "
            "history copies %5; saved %6; inherent reads %7\n"
            "training: %8 of %9 launches at the kernel floor; decode: %10 of %11")
            .arg(row.forward.read_vectors)
            .arg(row.forward.write_vectors)
            .arg(row.backward.read_vectors)
            .arg(row.backward.write_vectors)
            .arg(row.copy_vectors)
            .arg(row.saved_vectors)
            .arg(row.inherent_read_vectors)
            .arg(row.train.forward.floor_bound + row.train.backward.floor_bound)
            .arg(row.train.forward.launches + row.train.backward.launches)
            .arg(row.decode.forward.floor_bound)
            .arg(row.decode.forward.launches);
    auto put = [&](QTableWidget* table, const QStringList& cells) {
      auto* header = new QTableWidgetItem(name);
      header->setFont(font);
      header->setToolTip(tip);
      table->setVerticalHeaderItem(r, header);
      for (int col = 0; col < cells.size(); ++col) {
        auto* item = new QTableWidgetItem(cells[col]);
        item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
        item->setToolTip(tip);
        item->setFont(font);
        if (picked) item->setBackground(highlight);
        table->setItem(r, col, item);
      }
    };
    put(bytes_,
        {mb(row.forward.read_vectors), mb(row.forward.write_vectors), mb(row.backward.read_vectors),
         mb(row.backward.write_vectors),
         mb(std::max(row.forward.temp_vectors, row.backward.temp_vectors)), mb(row.saved_vectors)});
    put(time_,
        {QString::number(row.forward.launches) + " / " + QString::number(row.backward.launches),
         compact((row.train.forward.seconds + row.train.backward.seconds) * 1e3),
         percent(row.train.overhead_fraction), compact(row.decode.forward.seconds * 1e6),
         percent(row.decode.overhead_fraction)});
  }
  // The same width for the row names and the columns of both tables, so that they line up.
  for (QTableWidget* table : {bytes_, time_}) table->resizeColumnsToContents();
  int column_width = 0;
  for (QTableWidget* table : {bytes_, time_}) {
    for (int col = 0; col < table->columnCount(); ++col)
      column_width = std::max(column_width, table->columnWidth(col));
  }
  const int names = std::max(bytes_->verticalHeader()->sizeHint().width(),
                             time_->verticalHeader()->sizeHint().width());
  for (QTableWidget* table : {bytes_, time_}) {
    table->verticalHeader()->setFixedWidth(names);
    for (int col = 0; col < table->columnCount(); ++col) table->setColumnWidth(col, column_width);
    fit_height(table);
  }

  // The highlighted strategy in words: Block and Full, training and decode.
  QString text = "<b>" + qstr(to_string(highlighted_)) +
                 "</b>: " + qstr(strategy_summary(highlighted_)).toHtmlEscaped();
  for (const auto& row : c.rows) {
    if (row.strategy != highlighted_) continue;
    const double train_ms = (row.train.forward.seconds + row.train.backward.seconds) * 1e3;
    const double standard_ms =
        (row.train.standard_forward.seconds + row.train.standard_backward.seconds) * 1e3;
    // A one-pass read of the largest n sources (n + 2 vectors: the sources, its output and the
    // newest source's store) is floor-bound below this many tokens per call.
    const double crossover =
        crossover_tokens(row.max_sources + 2, c.d_model, c.bytes_per_element, c.hardware);
    text += QString(
                "<br><b>%1</b>%2: training step %3 ms against the standard residual's %4 ms "
                "(model step %5 ms), <b>%6 %</b>; decode %7 µs, <b>%8 %</b>; %9 of %10 "
                "training launches at the %11 µs floor; a one-pass read of its largest "
                "n = %12 sources stays at the floor below %13 tokens per call.")
                .arg(mode_name(row.mode))
                .arg(row.mode == ResidualMode::block ? " (" + qstr(c.block_layout) + ")" : "")
                .arg(compact(train_ms))
                .arg(compact(standard_ms))
                .arg(compact(row.train.model_seconds * 1e3))
                .arg(percent(row.train.overhead_fraction))
                .arg(compact(row.decode.forward.seconds * 1e6))
                .arg(percent(row.decode.overhead_fraction))
                .arg(row.train.forward.floor_bound + row.train.backward.floor_bound)
                .arg(row.train.forward.launches + row.train.backward.launches)
                .arg(compact(c.hardware.kernel_floor * 1e6))
                .arg(row.max_sources)
                .arg(QString::number(std::llround(crossover)));
  }
  text += QString(
              "<br>Standard residual: %1 adds each way (2 vectors read, 1 written per "
              "sublayer). Hardware: %2.")
              .arg(c.standard.launches)
              .arg(qstr(c.hardware.name));
  summary_->setText(text);
}

// ------------------------------------------------------------------ layout

LayoutPanel::LayoutPanel(QWidget* parent) : QWidget(parent) {
  setObjectName("layout_tab");
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  layout->addWidget(
      caption("<b>Block layout</b> against the pipeline: which sublayers and transformer layers "
              "each block holds, how many sources its reads see, and the chunks (virtual stages) "
              "it runs in; chunk c runs on rank c mod P (docs/math.md §3.6). Uneven blocks: "
              "type a list under <i>block sizes</i> on the left."));
  table_ = compact_table({"block", "sublayers", "layers", "size", "sources", "chunks", "ranks",
                          "crosses\nstage", "splits\na layer"});
  table_->setObjectName("layout_table");
  table_->verticalHeader()->setVisible(false);
  header_tip(table_, 1, "First and last sublayer of the block (1-based, inclusive)");
  header_tip(table_, 2,
             "Transformer layers the block touches (sublayer s is in layer ceil(s/2): attention "
             "odd, MLP even)");
  header_tip(table_, 3, "Sublayers in the block");
  header_tip(table_, 4,
             "Sources of the reads that form the inputs of the block's sublayers (min – max): the "
             "embedding, the completed blocks and the open block's partial sum");
  header_tip(table_, 5, "Pipeline chunks (0-based) the block's sublayers run in, of C = P·V");
  header_tip(table_, 6, "Pipeline ranks of those chunks (chunk c on rank c mod P)");
  header_tip(table_, 7, "✓: the block starts in one chunk and ends in another");
  header_tip(table_, 8,
             "✓: the block starts on an MLP sublayer or ends on an attention sublayer, so a "
             "transformer layer is split between two blocks");
  layout->addWidget(table_, 1);
  summary_ = caption("");
  summary_->setObjectName("layout_summary");
  layout->addWidget(summary_);
}

void LayoutPanel::set_rows(const std::vector<LayoutBlockRow>& rows, const CostInputs& in) {
  const std::size_t shown = std::min(rows.size(), kMaxShownBlocks);
  table_->setRowCount(static_cast<int>(shown));
  auto range = [](std::int64_t a, std::int64_t b) {
    return a == b ? QString::number(a) : QString::number(a) + " – " + QString::number(b);
  };
  std::int64_t crossing = 0, splitting = 0;
  for (const auto& row : rows) {
    crossing += row.crosses_stage ? 1 : 0;
    splitting += row.splits_layer ? 1 : 0;
  }
  for (std::size_t i = 0; i < shown; ++i) {
    const LayoutBlockRow& row = rows[i];
    QStringList ranks;
    std::set<std::int64_t> seen;
    for (std::int64_t chunk = row.first_chunk; chunk <= row.last_chunk; ++chunk) {
      const std::int64_t rank = chunk % in.pp;
      if (!seen.insert(rank).second) continue;
      if (ranks.size() == 4) {
        ranks << "…";
        break;
      }
      ranks << QString::number(rank);
    }
    const QString cells[] = {QString::number(row.block),
                             range(row.first_sublayer, row.last_sublayer),
                             range(row.first_layer, row.last_layer),
                             QString::number(row.size),
                             range(row.sources_min, row.sources_max),
                             range(row.first_chunk, row.last_chunk),
                             ranks.join(", "),
                             row.crosses_stage ? "✓" : "",
                             row.splits_layer ? "✓" : ""};
    for (int col = 0; col < 9; ++col) {
      auto* item = new QTableWidgetItem(cells[col]);
      item->setTextAlignment(col >= 7 ? Qt::AlignCenter : (Qt::AlignRight | Qt::AlignVCenter));
      if ((col == 7 && row.crosses_stage) || (col == 8 && row.splits_layer))
        item->setForeground(QColor(176, 0, 32));
      table_->setItem(static_cast<int>(i), col, item);
    }
  }
  table_->resizeColumnsToContents();
  const std::int64_t chunks = in.pp * in.vpp;
  QString text =
      QString(
          "L = %1 sublayers (%2 transformer layers) in %3 blocks: %4. P·V = %5 chunks. "
          "<b>%6</b> block(s) cross a stage boundary, <b>%7</b> split a transformer layer.")
          .arg(in.sublayers)
          .arg(in.sublayers / 2)
          .arg(rows.size())
          .arg(qstr(block_layout_of(in).describe()))
          .arg(chunks)
          .arg(crossing)
          .arg(splitting);
  if (in.block_sizes.empty()) {
    const auto k = layers_per_block(in.block_size);
    text += k ? QString(" S = %1 sublayers = K = %2 layers per block.").arg(in.block_size).arg(*k)
              : QString(" S = %1 is odd: blocks split layers (K = S/2 needs an even S).")
                    .arg(in.block_size);
  }
  if (shown < rows.size())
    text += QString(" The first %1 of %2 blocks are listed.").arg(shown).arg(rows.size());
  summary_->setText(text);
}

// ------------------------------------------------------------------ calibration

ChartSpec calibration_chart(const std::vector<CalibrationRow>& rows,
                            std::vector<CalibrationChart::Label>* labels) {
  // The core's chart (the CLI's report draws the same one), with each point's id beside it.
  std::vector<CalibrationPointPlace> places;
  ChartSpec spec = attnres::calibration_chart(rows, &places);
  if (labels) {
    labels->clear();
    for (std::size_t i = 0; i < rows.size(); ++i) {
      if (places[i].series < 0) continue;
      labels->push_back(
          {static_cast<std::size_t>(places[i].series), places[i].point, qstr(rows[i].point.id)});
    }
  }
  return spec;
}

void CalibrationChart::set_labels(std::vector<Label> labels) {
  labels_ = std::move(labels);
  drawn_.clear();
  viewport()->update();
}

QRectF CalibrationChart::label_rect(std::size_t index) const {
  return index < drawn_.size() ? drawn_[index] : QRectF();
}

void CalibrationChart::drawForeground(QPainter* painter, const QRectF& rect) {
  drawn_.assign(labels_.size(), QRectF());
  if (chart() && viewportTransform().isInvertible()) {
    painter->save();
    QFont font = painter->font();
    font.setPixelSize(std::max(9, static_cast<int>(std::lround(10 * chart_font_scale()))));
    painter->setFont(font);
    painter->setPen(QColor(40, 40, 40));
    const QFontMetricsF metrics(font);
    const QTransform to_scene = viewportTransform().inverted();
    const QRectF plot = chart()->mapToScene(chart()->plotArea()).boundingRect();
    // Each label beside its point, at the first of eight places that covers no earlier label.
    for (std::size_t i = 0; i < labels_.size(); ++i) {
      const QPointF at = to_scene.map(point_position(labels_[i].series, labels_[i].point));
      const QSizeF size(metrics.horizontalAdvance(labels_[i].text) + 2, metrics.height());
      const double gap = 6;
      const QPointF offsets[] = {{gap, -size.height()},
                                 {gap, 0},
                                 {-gap - size.width(), -size.height()},
                                 {-gap - size.width(), 0},
                                 {gap, -2 * size.height()},
                                 {gap, size.height()},
                                 {-gap - size.width(), -2 * size.height()},
                                 {-gap - size.width(), size.height()}};
      QRectF chosen;
      for (const QPointF& offset : offsets) {
        QRectF candidate(at + offset, size);
        if (!plot.contains(candidate)) continue;
        const bool clear = std::none_of(drawn_.begin(), drawn_.begin() + static_cast<long>(i),
                                        [&](const QRectF& r) { return r.intersects(candidate); });
        if (clear) {
          chosen = candidate;
          break;
        }
      }
      if (chosen.isNull()) chosen = QRectF(at + offsets[0], size);
      drawn_[i] = chosen;
      painter->drawText(chosen, Qt::AlignLeft | Qt::AlignVCenter, labels_[i].text);
    }
    painter->restore();
  }
  ChartPanel::drawForeground(painter, rect);  // the hover readout over the labels
}

CalibrationPanel::CalibrationPanel(QWidget* parent) : QWidget(parent) {
  setObjectName("calibration_tab");
  setProperty("attnres_inputs_independent", true);  // its chart and table: never stale
  rows_ = evaluate_calibration(builtin_calibration());
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  const CalibrationError error = calibration_error(rows_);
  char typical[32], worst[32];
  std::snprintf(typical, sizeof typical, "%.2f", error.typical_factor);
  std::snprintf(worst, sizeof worst, "%.2f", error.worst_factor);
  auto* summary = caption(
      QString("<b>Calibration</b> against public measurements (docs/calibration.md, "
              "docs/math.md §3.6): over the %1 measured points (bounds and fitted points "
              "aside) the model is off by a factor of <b>%2</b> typically (geometric mean), "
              "<b>%3</b> at worst (%4). Hover a row for its assumptions.")
          .arg(error.points)
          .arg(typical)
          .arg(worst)
          .arg(qstr(error.worst_id)));
  summary->setObjectName("calibration_summary");
  layout->addWidget(summary);
  auto* splitter = new QSplitter(Qt::Vertical);
  splitter->setChildrenCollapsible(false);
  chart_ = new CalibrationChart;
  chart_->setObjectName("calibration_chart");
  // The built-in table, whatever the inputs: an invalid input does not make it stale.
  chart_->setProperty("attnres_inputs_independent", true);
  std::vector<CalibrationChart::Label> labels;
  chart_->set_spec(calibration_chart(rows_, &labels));
  chart_->set_labels(std::move(labels));
  // Marker shapes tell the kinds apart beside the colours (the legend draws them too).
  const auto all = chart_->chart()->series();
  const QScatterSeries::MarkerShape shapes[] = {QScatterSeries::MarkerShapeCircle,
                                                QScatterSeries::MarkerShapeRectangle,
                                                QScatterSeries::MarkerShapeTriangle};
  for (qsizetype i = 0; i < std::min<qsizetype>(all.size(), 3); ++i) {
    if (auto* scatter = qobject_cast<QScatterSeries*>(all[i])) scatter->setMarkerShape(shapes[i]);
  }
  splitter->addWidget(chart_);
  // The figures first; the long source text last (elided, whole in the tooltip).
  auto* table = compact_table(
      {"id", "measured", "modelled", "ratio", "kind", "hardware", "regime", "source"});
  table->setObjectName("calibration_table");
  table->verticalHeader()->setVisible(false);
  header_tip(table, 1, "The figure as published");
  header_tip(table, 2, "The cost engine's value for the same setting and quantity");
  header_tip(table, 3, "modelled / measured (a bound: modelled / the bound)");
  header_tip(table, 4,
             "measured: compared; fitted: a model parameter (kernel_floor) was set from it; bound: "
             "a claimed upper bound, ✓ when the model stays under it");
  header_tip(table, 6, "What limits the modelled figure (launches at the floor, bytes)");
  header_tip(table, 7, "Where the measurement was published (the URL is in the row's tooltip)");
  table->setRowCount(static_cast<int>(rows_.size()));
  for (std::size_t i = 0; i < rows_.size(); ++i) {
    const CalibrationRow& row = rows_[i];
    const CalibrationPoint& p = row.point;
    char ratio[32];
    std::snprintf(ratio, sizeof ratio, "%.2f×", row.ratio);
    const QString kind = row.bound  ? QString(row.within ? "bound ✓" : "bound ✗")
                         : p.fitted ? QString("fitted")
                                    : QString("measured");
    const QString cells[] = {qstr(p.id),
                             qstr(p.measured_text),
                             quantity_text(p.quantity, row.modelled),
                             QString::fromUtf8(ratio),
                             kind,
                             qstr(p.hardware_name),
                             qstr(row.regime),
                             qstr(p.source)};
    const QString tip = "<b>" + qstr(p.title).toHtmlEscaped() + "</b><br>" +
                        qstr(p.source).toHtmlEscaped() + "<br>" + qstr(p.url).toHtmlEscaped() +
                        "<br><br><b>Assumptions:</b> " + qstr(p.assumptions).toHtmlEscaped() +
                        "<br><br><b>Modelled:</b> " + qstr(row.detail).toHtmlEscaped() + " (" +
                        qstr(to_string(p.strategy)).toHtmlEscaped() + ", " +
                        qstr(to_string(p.quantity)).toHtmlEscaped() + ")";
    for (int col = 0; col < 8; ++col) {
      auto* item = new QTableWidgetItem(cells[col]);
      item->setToolTip(tip);
      if (col == 2 || col == 3) item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
      table->setItem(static_cast<int>(i), col, item);
    }
  }
  table->resizeColumnsToContents();
  for (const int col : {1, 6, 7})
    table->setColumnWidth(col, std::min(table->columnWidth(col), 200));
  splitter->addWidget(table);
  splitter->setStretchFactor(0, 3);
  splitter->setStretchFactor(1, 2);
  splitter->setSizes({320, 210});
  layout->addWidget(splitter, 1);
}

const ChartSpec& CalibrationPanel::spec() const {
  return chart_->spec();
}

}  // namespace attnres::gui
