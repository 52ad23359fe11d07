// The cost explorer's Decision tab: the budgets and the grid typed, the plan's recommendation,
// one line per N and the plan table (docs/math.md §3.9). The plan comes from make_plan and the
// table from the report's plan_table, so the tab shows what `attnres plan` prints.
#include "decision_panel.hpp"

#include <QCheckBox>
#include <QEvent>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QSplitter>
#include <QTableWidget>
#include <QVBoxLayout>
#include <cmath>
#include <limits>

#include "attnres/block_layout.hpp"
#include "attnres/cost_input_fields.hpp"
#include "attnres/error.hpp"
#include "attnres/format.hpp"
#include "attnres/report.hpp"
#include "explorer_results.hpp"
#include "view_kit.hpp"

namespace attnres::gui {

namespace {

QString text_of(const std::string& text) {
  return QString::fromStdString(text);
}

QLineEdit* line_edit(const char* name, const QString& placeholder, const QString& tip) {
  auto* edit = new QLineEdit;
  edit->setObjectName(name);
  edit->setPlaceholderText(placeholder);
  edit->setClearButtonEnabled(true);
  edit->setToolTip(tip);
  return edit;
}

QString list_text(const std::vector<std::int64_t>& values) {
  QStringList parts;
  for (const std::int64_t v : values) parts << QString::number(v);
  return parts.join(",");
}

// A red input through the palette, as the view frames the inputs of its errors.
void mark(QWidget* field, bool error) {
  if (error) {
    QPalette palette = field->palette();
    palette.setColor(QPalette::Base, QColor(253, 214, 211));
    palette.setColor(QPalette::Text, QColor(138, 28, 28));
    field->setPalette(palette);
  } else {
    field->setPalette(QPalette());
    field->setAttribute(Qt::WA_SetPalette, false);
  }
}

// The plan table's columns that may be the same in every row (the grid's fixed values): shown
// once above the table instead, so that a narrow page keeps the overhead and the verdict in view.
bool may_fold(const std::string& key) {
  return key == "tp" || key == "cp" || key == "ep" || key == "pp" || key == "vpp" || key == "dp" ||
         key == "strategy" || key == "hardware";
}

// The parallel degrees a plan may try, one line edit each (empty: the setting's own degree).
struct DegreeList {
  const char* name;   // object name of its line edit
  const char* label;  // "t"
  const char* what;   // "tensor-parallel degrees t"
  std::vector<std::int64_t> PlanGrid::*member;
};
constexpr DegreeList kDegreeLists[] = {
    {"plan_tp", "t", "tensor-parallel degrees t", &PlanGrid::tp},
    {"plan_cp", "c", "context-parallel degrees c", &PlanGrid::cp},
    {"plan_ep", "e", "expert-parallel degrees e", &PlanGrid::ep},
    {"plan_pp", "P", "pipeline ranks P", &PlanGrid::pp},
    {"plan_vpp", "V", "virtual stages V", &PlanGrid::vpp}};

}  // namespace

DecisionPanel::DecisionPanel(QWidget* parent) : QWidget(parent) {
  setObjectName("decision_tab");
  auto* column = new QVBoxLayout(this);
  column->setContentsMargins(4, 4, 4, 4);
  column->setSpacing(4);
  max_overhead_ = line_edit("plan_max_overhead", "none",
                            "Budget: the AttnRes step overhead at most this many percent, e.g. 2 "
                            "(empty: no budget; docs/math.md §3.9)");
  max_traffic_ = line_edit("plan_max_pipeline_gb", "none",
                           "Budget: the pipeline traffic per step, all ranks and both directions, "
                           "at most this many GB (empty: no budget; docs/math.md §3.9)");
  max_step_ = line_edit("plan_max_step_seconds", "none",
                        "Budget: the training step at most this many seconds (empty: no budget; "
                        "docs/math.md §3.9)");
  must_fit_ = new QCheckBox("must fit the device memory");
  must_fit_->setObjectName("plan_must_fit");
  must_fit_->setChecked(PlanBudgets{}.must_fit);
  must_fit_->setToolTip(
      "Budget: the peak rank's memory within the hardware preset's device memory (off: reported "
      "only; docs/math.md §3.7, §3.9)");
  blocks_ = line_edit("plan_blocks", "default",
                      "Block counts N to try, as attnres plan --try-blocks takes them: 1,2,4,8, "
                      "a range 1:122 or 1:122:x2, or divisors (empty: those equal blocks can "
                      "make near 1, 2, 4, ... up to L; docs/math.md §3.9)");
  for (const DegreeList& list : kDegreeLists) {
    degrees_.push_back(line_edit(list.name, "as set",
                                 QString("The %1 to try, e.g. 4,8 or 1:8:x2 (empty: the %2 of the "
                                         "inputs; docs/math.md §3.9)")
                                     .arg(list.what, list.label)));
  }
  auto* grid = new QGridLayout;
  grid->setHorizontalSpacing(6);
  grid->setVerticalSpacing(3);
  auto add = [grid](int row, int col, const QString& label, QWidget* input) {
    auto* text = new QLabel(label);
    text->setBuddy(input);
    grid->addWidget(text, row, 2 * col);
    grid->addWidget(input, row, 2 * col + 1);
  };
  add(0, 0, "max AttnRes overhead (%)", max_overhead_);
  add(0, 1, "max pipeline traffic (GB)", max_traffic_);
  add(1, 0, "max step (s)", max_step_);
  grid->addWidget(must_fit_, 1, 2, 1, 2);
  auto* blocks_label = new QLabel("block counts N");
  blocks_label->setBuddy(blocks_);
  grid->addWidget(blocks_label, 2, 0);
  grid->addWidget(blocks_, 2, 1, 1, 3);
  grid->setColumnStretch(1, 1);
  grid->setColumnStretch(3, 1);
  column->addLayout(grid);
  auto* degrees = new QHBoxLayout;
  degrees->setSpacing(4);
  auto* degrees_label = new QLabel("also try");
  degrees_label->setToolTip("Parallel degrees to try with every N (empty: as set)");
  degrees->addWidget(degrees_label);
  for (std::size_t i = 0; i < degrees_.size(); ++i) {
    auto* label = new QLabel(kDegreeLists[i].label);
    label->setBuddy(degrees_[i]);
    degrees->addWidget(label);
    degrees->addWidget(degrees_[i], 1);
  }
  column->addLayout(degrees);
  extras_label_ = new QLabel;
  extras_label_->setObjectName("plan_extras");
  extras_label_->setWordWrap(true);
  extras_label_->setTextFormat(Qt::PlainText);
  extras_label_->setVisible(false);
  column->addWidget(extras_label_);
  problem_ = new QLabel;
  problem_->setObjectName("plan_problem");
  problem_->setWordWrap(true);
  problem_->setTextFormat(Qt::PlainText);
  problem_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  problem_->setStyleSheet(kBadStyle);
  problem_->setVisible(false);
  column->addWidget(problem_);
  summary_ = new QLabel;
  summary_->setObjectName("plan_summary");
  summary_->setWordWrap(true);
  summary_->setTextFormat(Qt::PlainText);
  summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  QFont bold = summary_->font();
  bold.setBold(true);
  summary_->setFont(bold);
  summary_->setToolTip(
      "The recommendation: the largest N that meets every budget, its fastest setting "
      "(docs/math.md §3.9)");
  column->addWidget(summary_);
  // Which memory figure the plan's are: the simulated schedule's peak; the Memory tab shows the
  // closed form, another number for the same setting.
  auto* memory_kind = new QLabel(QString("Memory per rank here: the %1, counted with the weights, "
                                         "gradients and optimizer states. The Memory tab shows "
                                         "the %2.")
                                     .arg(QString::fromUtf8(kSimulatedMemory))
                                     .arg(QString::fromUtf8(kAnalyticMemory)));
  memory_kind->setObjectName("plan_memory_kind");
  memory_kind->setWordWrap(true);
  column->addWidget(memory_kind);
  // One line per N over the table, the two in a splitter: both scroll, the user shares the room.
  by_blocks_ = new QPlainTextEdit;
  by_blocks_->setObjectName("plan_by_blocks");
  by_blocks_->setReadOnly(true);
  by_blocks_->setLineWrapMode(QPlainTextEdit::WidgetWidth);
  by_blocks_->setToolTip("Each N tried: its best setting that meets the budgets, or why none does");
  by_blocks_->setMinimumHeight(3 * by_blocks_->fontMetrics().height());
  auto* split = new QSplitter(Qt::Vertical);
  split->setObjectName("plan_split");
  split->setChildrenCollapsible(false);
  split->addWidget(by_blocks_);
  auto* lower = new QWidget;
  auto* lower_column = new QVBoxLayout(lower);
  lower_column->setContentsMargins(0, 0, 0, 0);
  lower_column->setSpacing(2);
  split->addWidget(lower);
  split->setStretchFactor(0, 1);
  split->setStretchFactor(1, 2);
  column->addWidget(split, 1);
  constant_ = new QLabel;
  constant_->setObjectName("plan_constant");
  constant_->setWordWrap(true);
  constant_->setTextFormat(Qt::PlainText);
  constant_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  lower_column->addWidget(constant_);
  table_ = new QTableWidget;
  table_->setObjectName("plan_table");
  table_->verticalHeader()->setVisible(false);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setWordWrap(false);
  table_->setMinimumHeight(90);
  table_->verticalHeader()->setDefaultSectionSize(table_->fontMetrics().height() + 6);
  lower_column->addWidget(table_, 1);
}

void DecisionPanel::changeEvent(QEvent* event) {
  QWidget::changeEvent(event);
  if (event->type() != QEvent::FontChange) return;
  // Presentation mode: the styled labels take the new type (a style sheet keeps the font it was
  // polished with), the table's rows follow it.
  for (QLabel* label : {problem_, summary_}) label->setStyleSheet(label->styleSheet());
  table_->verticalHeader()->setDefaultSectionSize(table_->fontMetrics().height() + 6);
}

std::vector<QWidget*> DecisionPanel::inputs() const {
  std::vector<QWidget*> all = {max_overhead_, max_traffic_, max_step_, must_fit_, blocks_};
  all.insert(all.end(), degrees_.begin(), degrees_.end());
  return all;
}

PlanRequest DecisionPanel::request(std::int64_t sublayers) const {
  PlanRequest r;
  blocks_->setPlaceholderText("default " + list_text(plan_default_blocks(sublayers)));
  // A budget: empty = none; else a number, scaled to the engine's unit and checked by the engine's
  // rule for that budget alone (the message then names this input).
  auto budget = [&r](QLineEdit* edit, const char* what, double scale, double PlanBudgets::*member) {
    const QString text = edit->text().trimmed();
    if (!r.problem.empty() || text.isEmpty()) return;
    bool ok = false;
    const double value = text.toDouble(&ok);
    if (!ok) {
      r.problem = std::string(what) + ": \"" + printable_text(text.toStdString()) +
                  "\" is not a number (empty: no budget)";
      r.culprit = edit;
      return;
    }
    r.budgets.*member = value * scale;
    PlanBudgets alone;
    alone.*member = value * scale;
    if (std::string problem = plan_budgets_problem(alone); !problem.empty()) {
      r.problem =
          std::string(what) + ": " + problem + ", got " + printable_text(text.toStdString());
      r.culprit = edit;
    }
  };
  budget(max_overhead_, "max AttnRes overhead (%)", 0.01, &PlanBudgets::max_overhead_fraction);
  budget(max_traffic_, "max pipeline traffic (GB)", 1e9, &PlanBudgets::max_pipeline_bytes);
  budget(max_step_, "max step (s)", 1.0, &PlanBudgets::max_step_seconds);
  r.budgets.must_fit = must_fit_->isChecked();
  if (!r.problem.empty()) return r;
  // The CLI's forms of --try-blocks and --try-tp ...: "1,2,4", "1:122", "1:122:x2", "divisors".
  auto list = [&r, sublayers](QLineEdit* edit, const char* what, std::vector<std::int64_t>& into) {
    const std::string text = edit->text().trimmed().toStdString();
    if (!r.problem.empty() || text.empty()) return;
    try {
      into = parse_sweep_values(text, what, sublayers);
      for (const std::int64_t v : into)
        if (v < 1)
          throw Error(std::string(what) + ": values must be >= 1, got " + std::to_string(v));
    } catch (const Error& error) {
      r.problem = error.what();
      r.culprit = edit;
    }
  };
  // The scenario's strategies, hardware and world size; N and the degrees as typed.
  r.grid.strategies = extras_.strategies;
  r.grid.hardware = extras_.hardware;
  r.grid.gpus = extras_.gpus;
  list(blocks_, "block counts N", r.grid.blocks);
  for (std::size_t i = 0; i < degrees_.size(); ++i)
    list(degrees_[i], kDegreeLists[i].what, r.grid.*kDegreeLists[i].member);
  if (!r.problem.empty()) return r;
  if (r.grid.blocks.empty()) r.grid.blocks = plan_default_blocks(sublayers);
  for (const std::int64_t n : r.grid.blocks) {
    if (n > sublayers) {
      r.problem = "block counts N: N = " + std::to_string(n) +
                  " exceeds L = " + std::to_string(sublayers) + " sublayers";
      r.culprit = blocks_;
      return r;
    }
  }
  if (std::string problem = plan_grid_problem(r.grid); !problem.empty()) {
    r.problem = "the grid: " + problem;
    r.culprit = blocks_;
  }
  return r;
}

void DecisionPanel::apply_plan(const ScenarioPlan& plan, std::int64_t sublayers) {
  for (QWidget* input : inputs()) input->blockSignals(true);
  auto number = [](double v, double scale) {
    return std::isnan(v) ? QString() : text_of(format_number(v / scale));
  };
  max_overhead_->setText(number(plan.budgets.max_overhead_fraction, 0.01));
  max_traffic_->setText(number(plan.budgets.max_pipeline_bytes, 1e9));
  max_step_->setText(number(plan.budgets.max_step_seconds, 1.0));
  must_fit_->setChecked(plan.budgets.must_fit);
  // The default N stay the default (they follow L).
  blocks_->setText(
      plan.grid.blocks == plan_default_blocks(sublayers) ? QString() : list_text(plan.grid.blocks));
  for (std::size_t i = 0; i < degrees_.size(); ++i)
    degrees_[i]->setText(list_text(plan.grid.*kDegreeLists[i].member));
  for (QWidget* input : inputs()) input->blockSignals(false);
  extras_ = PlanGrid{};
  extras_.strategies = plan.grid.strategies;
  extras_.hardware = plan.grid.hardware;
  extras_.gpus = plan.grid.gpus;
  QStringList extras;
  if (!extras_.strategies.empty()) {
    QStringList names;
    for (const Strategy strategy : extras_.strategies) names << text_of(to_string(strategy));
    extras << "strategies " + names.join(", ");
  }
  if (!extras_.hardware.empty()) {
    QStringList names;
    for (const Hardware& hardware : extras_.hardware) names << text_of(hardware.name);
    extras << "hardware " + names.join(", ");
  }
  if (extras_.gpus > 0) extras << QString("W = %1 GPUs (D = W / (t·c·P))").arg(extras_.gpus);
  extras_label_->setText("The scenario's [plan] also tries: " + extras.join("; "));
  extras_label_->setVisible(!extras.isEmpty());
}

void DecisionPanel::clear_problem() {
  for (QWidget* shown : std::initializer_list<QWidget*>{summary_, by_blocks_, table_})
    shown->setEnabled(true);
  problem_->setVisible(false);
  problem_->clear();
  if (framed_) mark(framed_, false);
  framed_ = nullptr;
}

void DecisionPanel::set_problem(const std::string& message, QWidget* culprit) {
  clear_problem();
  problem_->setText(
      text_of("error: " + printable_text(message) +
              (result_.candidates.empty() ? "" : " (the plan below is not current)")));
  problem_->setVisible(true);
  // The last plan stays, greyed as the other tabs' stale charts are veiled.
  for (QWidget* shown : std::initializer_list<QWidget*>{summary_, by_blocks_, table_})
    shown->setEnabled(false);
  if (culprit) {
    mark(culprit, true);
    framed_ = culprit;
  }
}

int DecisionPanel::recommended_row() const {
  return result_.recommended ? static_cast<int>(*result_.recommended) : -1;
}

void DecisionPanel::set_result(PlanResult plan) {
  clear_problem();
  result_ = std::move(plan);
  summary_->setText(text_of(result_.summary));
  summary_->setStyleSheet(result_.recommended ? kGoodStyle : kWarningStyle);
  QString lines;
  for (const auto& line : result_.by_blocks)
    lines += (lines.isEmpty() ? "• " : "\n• ") + text_of(line);
  by_blocks_->setPlainText(lines);
  const ReportTable table = plan_table(result_);
  show_report_table(table_, table);
  // The columns the same in every row: named once above the table.
  QStringList constant;
  for (std::size_t c = 0; c < table.columns.size(); ++c) {
    bool same = may_fold(table.columns[c].key) && !table.rows.empty();
    for (const auto& row : table.rows) same = same && row[c] == table.rows.front()[c];
    table_->setColumnHidden(static_cast<int>(c), same);
    if (same) constant << text_of(table.header[c] + " = " + table.rows.front()[c]);
  }
  constant_->setText(constant.isEmpty() ? QString()
                                        : "Every setting: " + constant.join(", ") + ".");
  constant_->setVisible(!constant.isEmpty());
  // The recommended row bold, those that meet every budget green, impossible ones grey.
  const int recommended = recommended_row();
  for (int r = 0; r < table_->rowCount(); ++r) {
    const PlanCandidate& c = result_.candidates[static_cast<std::size_t>(r)];
    for (int col = 0; col < table_->columnCount(); ++col) {
      QTableWidgetItem* item = table_->item(r, col);
      if (!item) continue;
      if (c.meets()) item->setBackground(QColor(227, 244, 225));
      if (!c.invalid.empty()) item->setForeground(QColor(120, 120, 120));
      if (r == recommended) {
        QFont font = item->font();
        font.setBold(true);
        item->setFont(font);
      }
      item->setToolTip(item->text());
    }
  }
  QHeaderView* header = table_->horizontalHeader();
  for (int col = 0; col < table_->columnCount(); ++col)
    header->setSectionResizeMode(col, QHeaderView::ResizeToContents);
  header->setStretchLastSection(true);  // why not
}

}  // namespace attnres::gui
