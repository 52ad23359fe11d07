// The cost explorer's Step tab: one simulated training step, AttnRes against the standard
// residual, its parts, the three overhead numbers side by side and the stage layout
// (docs/math.md §3.8, §3.3). Every number comes from evaluate_pipeline and the tables from the
// report's step_table and reconciliation_table, so the tab shows what `attnres pipeline` prints.
#include "step_panel.hpp"

#include <QCheckBox>
#include <QEvent>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QScrollArea>
#include <QScrollBar>
#include <QTableWidget>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "attnres/format.hpp"
#include "view_kit.hpp"

namespace attnres::gui {

namespace {

QString text_of(const std::string& text) {
  return QString::fromStdString(text);
}

// A caption over a table: its report title.
QLabel* caption(const QString& text, const char* name) {
  auto* label = new QLabel(text);
  label->setObjectName(name);
  label->setWordWrap(true);  // a narrow page never scrolls sideways for a caption
  QFont bold = label->font();
  bold.setBold(true);
  label->setFont(bold);
  return label;
}

// A table as tall as its rows: the page scrolls, never the table (it has few rows).
QTableWidget* report_table_widget(const char* name) {
  auto* table = new QTableWidget;
  table->setObjectName(name);
  table->verticalHeader()->setVisible(false);
  table->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table->setWordWrap(false);
  table->setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  table->setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
  return table;
}

// The height that shows every row, the header and the horizontal scroll bar when the columns are
// wider than the view; rows as tall as the type now.
void fit_height(QTableWidget* table) {
  table->verticalHeader()->setDefaultSectionSize(table->fontMetrics().height() + 6);
  int height = 2 * table->frameWidth() + table->horizontalHeader()->sizeHint().height();
  for (int r = 0; r < table->rowCount(); ++r) height += table->rowHeight(r);
  // The width the columns need (the header lays its sections out later, so not its length): a
  // stretched column can shrink to the minimum section.
  const QHeaderView* header = table->horizontalHeader();
  int needed = 0;
  for (int c = 0; c < table->columnCount(); ++c) {
    if (header->isSectionHidden(c)) continue;
    switch (header->sectionResizeMode(c)) {
      case QHeaderView::Stretch:
        needed += header->minimumSectionSize();
        break;
      case QHeaderView::ResizeToContents:
        needed += std::max(static_cast<const QAbstractItemView*>(table)->sizeHintForColumn(c),
                           header->sectionSizeHint(c));
        break;
      default:
        needed += header->sectionSize(c);
    }
  }
  // The view's width from the table's (a resize reaches the filter before the viewport moves).
  const int view = table->width() - 2 * table->frameWidth() -
                   (table->verticalHeader()->isHidden() ? 0 : table->verticalHeader()->width());
  if (needed > view) height += table->horizontalScrollBar()->sizeHint().height();
  if (table->height() != height) table->setFixedHeight(height);
}

// The text column of a report table takes the width left (elided, the full text in its tooltip).
void stretch_text_column(QTableWidget* table, int column) {
  QHeaderView* header = table->horizontalHeader();
  for (int c = 0; c < table->columnCount(); ++c)
    header->setSectionResizeMode(
        c, c == column ? QHeaderView::Stretch : QHeaderView::ResizeToContents);
  for (int r = 0; r < table->rowCount(); ++r) {
    if (QTableWidgetItem* item = table->item(r, column)) item->setToolTip(item->text());
  }
}

// "3" or "3.5" transformer layers.
std::string layers_of(std::int64_t sublayers) {
  return format_number(static_cast<double>(sublayers) / 2);
}

// Layer k holds sublayers 2k-1 (attention) and 2k (MLP).
std::int64_t layer_of(std::int64_t sublayer) {
  return (sublayer + 1) / 2;
}

}  // namespace

StepPanel::StepPanel(QWidget* parent) : QWidget(parent) {
  setObjectName("step_tab");
  // The page scrolls when the window is short (1024x700): the tables keep every row in view.
  auto* outer = new QVBoxLayout(this);
  outer->setContentsMargins(0, 0, 0, 0);
  auto* scroll = new QScrollArea;
  scroll->setObjectName("step_scroll");
  scroll->setFrameShape(QFrame::NoFrame);
  scroll->setWidgetResizable(true);
  outer->addWidget(scroll);
  auto* page = new QWidget;
  scroll->setWidget(page);
  auto* column = new QVBoxLayout(page);
  column->setContentsMargins(4, 4, 4, 4);
  column->setSpacing(4);
  // Which collectives hide behind compute (CommOverlap, defaults from Megatron-LM).
  auto* top = new QHBoxLayout;
  auto* overlap_label = new QLabel("overlapped with compute:");
  overlap_label->setToolTip(
      "The parallel groups whose collectives hide behind compute: a hidden group shows only what "
      "exceeds the chunk's compute, an exposed one adds all of it (docs/math.md §3.8)");
  top->addWidget(overlap_label);
  const CommOverlap defaults;
  const char* what[] = {"tensor-parallel collectives", "context-parallel key/value exchange",
                        "expert-parallel all-to-all",
                        "gradient collectives (beyond the last micro-batch's backward)"};
  for (std::size_t i = 0; i < kCommGroupNames.size(); ++i) {
    const auto& entry = kCommGroupNames[i];
    const QString name = QString::fromUtf8(entry.name.data(), static_cast<int>(entry.name.size()));
    auto* box = new QCheckBox(name);
    box->setObjectName("overlap_" + name);
    box->setChecked(defaults.of(entry.value));
    box->setToolTip(QString("%1 (%2) overlap compute when checked, else they sit on the critical "
                            "path (docs/math.md §3.8)")
                        .arg(what[i], name));
    top->addWidget(box);
    overlap_boxes_.push_back(box);
  }
  top->addStretch(1);
  column->addLayout(top);
  headline_ = new QLabel;
  headline_->setObjectName("step_headline");
  headline_->setWordWrap(true);
  headline_->setTextFormat(Qt::PlainText);
  headline_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  QFont bold = headline_->font();
  bold.setBold(true);
  headline_->setFont(bold);
  headline_->setStyleSheet(kHeadlineStyle);
  headline_->setToolTip(
      "The simulated step with AttnRes over the same step with the standard residual, minus 1: "
      "the one AttnRes step overhead; its parts sum to it (docs/math.md §3.8)");
  column->addWidget(headline_);
  setting_ = new QLabel;
  setting_->setObjectName("step_setting");
  setting_->setWordWrap(true);
  setting_->setTextFormat(Qt::PlainText);
  setting_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  column->addWidget(setting_);
  warning_ = new QLabel;
  warning_->setObjectName("stage_warning");
  warning_->setWordWrap(true);
  warning_->setTextFormat(Qt::PlainText);
  warning_->setStyleSheet(kWarningStyle);
  warning_->setVisible(false);
  column->addWidget(warning_);
  column->addWidget(caption("Where the step's time goes (docs/math.md §3.8)", "step_parts_title"));
  parts_ = report_table_widget("step_parts");
  column->addWidget(parts_);
  column->addWidget(
      caption("What AttnRes adds: three numbers, three questions", "step_reconciliation_title"));
  reconciliation_ = report_table_widget("step_reconciliation");
  column->addWidget(reconciliation_);
  column->addWidget(
      caption("Stage layout: the layers of each pipeline chunk (a column) and its "
              "rank, c mod P (docs/math.md §3.3)",
              "stage_layout_title"));
  stages_ = report_table_widget("stage_layout");
  stages_->verticalHeader()->setVisible(true);
  stages_->setRowCount(3);
  stages_->setVerticalHeaderLabels({"rank", "layers", "layer range"});
  stages_->setToolTip(
      "Chunk c (the column header) runs on rank c mod P and holds the layers of a stage_layers "
      "list, or whole layers split evenly. An amber chunk starts or ends inside a layer "
      "(docs/math.md §3.3)");
  column->addWidget(stages_);
  column->addStretch(1);
  for (QTableWidget* table : {parts_, reconciliation_, stages_}) {
    table->installEventFilter(this);
    fit_height(table);
  }
}

bool StepPanel::eventFilter(QObject* watched, QEvent* event) {
  // A new width may add or remove a table's horizontal scroll bar.
  if (event->type() == QEvent::Resize) {
    for (QTableWidget* table : {parts_, reconciliation_, stages_})
      if (watched == table) fit_height(table);
  }
  return QWidget::eventFilter(watched, event);
}

void StepPanel::changeEvent(QEvent* event) {
  QWidget::changeEvent(event);
  if (event->type() != QEvent::FontChange) return;
  // Presentation mode: the styled labels take the new type (a style sheet keeps the font it was
  // polished with), the tables their rows and columns.
  for (QLabel* label : {headline_, warning_}) label->setStyleSheet(label->styleSheet());
  stages_->resizeColumnsToContents();
  for (QTableWidget* table : {parts_, reconciliation_, stages_}) fit_height(table);
}

CommOverlap StepPanel::overlap() const {
  CommOverlap overlap;
  for (std::size_t i = 0; i < kCommGroupNames.size(); ++i)
    overlap.of(kCommGroupNames[i].value) = overlap_boxes_[i]->isChecked();
  return overlap;
}

void StepPanel::set_overlap(const CommOverlap& overlap) {
  for (std::size_t i = 0; i < kCommGroupNames.size(); ++i) {
    const QSignalBlocker blocker(overlap_boxes_[i]);
    overlap_boxes_[i]->setChecked(overlap.of(kCommGroupNames[i].value));
  }
}

void StepPanel::set_problem(const std::string& message) {
  headline_->setText(text_of("The step cannot be simulated: " + message));
  headline_->setStyleSheet(kBadStyle);
}

void StepPanel::set_result(StepResult result) {
  result_ = std::move(result);
  headline_->setText(text_of(result_.headline));
  headline_->setStyleSheet(kHeadlineStyle);
  setting_->setText(text_of(result_.setting));
  const std::string& warning = result_.report.stage_warning;
  warning_->setText(text_of("Warning: " + warning));
  warning_->setVisible(!warning.empty());
  show_report_table(parts_, result_.parts);
  stretch_text_column(parts_, 1);
  // The step row sums the parts above it.
  const int last = parts_->rowCount() - 1;
  for (int c = 0; last >= 0 && c < parts_->columnCount(); ++c) {
    if (QTableWidgetItem* item = parts_->item(last, c)) {
      QFont font = item->font();
      font.setBold(true);
      item->setFont(font);
    }
  }
  show_report_table(reconciliation_, result_.reconciliation);
  stretch_text_column(reconciliation_, 2);
  // The step's own row is the answer.
  for (int r = 0; r < reconciliation_->rowCount(); ++r) {
    if (reconciliation_->item(r, 0)->text() != "step") continue;
    for (int c = 0; c < reconciliation_->columnCount(); ++c) {
      QFont font = reconciliation_->item(r, c)->font();
      font.setBold(true);
      reconciliation_->item(r, c)->setFont(font);
    }
  }
  const auto& chunks = result_.chunks;
  stages_->setColumnCount(static_cast<int>(chunks.size()));
  QStringList header;
  for (const StageChunk& chunk : chunks) header << QString::number(chunk.chunk);
  stages_->setHorizontalHeaderLabels(header);
  const QColor split(255, 236, 190);
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    const StageChunk& chunk = chunks[i];
    const std::int64_t first = layer_of(chunk.first_sublayer), end = layer_of(chunk.last_sublayer);
    const QString cells[] = {
        QString::number(chunk.rank), text_of(layers_of(chunk.sublayers())),
        first == end ? QString::number(first) : QString("%1-%2").arg(first).arg(end)};
    const QString tip = QString("chunk %1 on rank %2: sublayers %3-%4 (layers %5-%6)%7")
                            .arg(chunk.chunk)
                            .arg(chunk.rank)
                            .arg(chunk.first_sublayer)
                            .arg(chunk.last_sublayer)
                            .arg(first)
                            .arg(end)
                            .arg(chunk.splits_layer ? "; a boundary cuts a layer" : "");
    for (int r = 0; r < 3; ++r) {
      auto* item = new QTableWidgetItem(cells[r]);
      item->setTextAlignment(Qt::AlignCenter);
      item->setToolTip(tip);
      if (chunk.splits_layer) item->setBackground(split);
      stages_->setItem(r, static_cast<int>(i), item);
    }
  }
  stages_->resizeColumnsToContents();
  for (QTableWidget* table : {parts_, reconciliation_, stages_}) fit_height(table);
}

}  // namespace attnres::gui
