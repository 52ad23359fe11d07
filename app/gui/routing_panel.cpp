// The routing statistics page of the Depth attention view (routing_panel.hpp).
#include "routing_panel.hpp"

#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QTableWidget>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <iterator>

#include "attnres/model_charts.hpp"
#include "widgets.hpp"

namespace attnres::gui {

namespace {

// As attnres inspect prints them: fixed decimals, "-" where there is no value.
QString fixed_or_dash(double value, int decimals) {
  return std::isfinite(value) ? QString::number(value, 'f', decimals) : QString("-");
}

// The table's columns: header, tooltip (what the column means), decimals.
struct Column {
  const char* header;
  const char* tip;
};
constexpr Column kColumns[] = {
    {"read", "r = 0 .. L: the input of sublayer r + 1, then the final read (L)"},
    {"target", "what the read feeds"},
    {"sources", "n: how many sources the read weighs (hover a cell for their names)"},
    {"norm. entropy",
     "H / ln n, H = -Σ α ln α: 1 spreads evenly over the n sources, 0 takes one (empty for n = 1)"},
    {"eff. sources", "exp(H): how many sources the read spreads over (1 .. n)"},
    {"top-1", "the largest weight α of the read"},
    {"on emb", "the weight on the embedding (v0 or b0; empty when the read has no such source)"},
    {"on recent", "the weight on the last source: the most recent output or the partial block"},
};

}  // namespace

RoutingPanel::RoutingPanel(QWidget* parent) : QWidget(parent) {
  auto* column = new QVBoxLayout(this);
  title_ = new QLabel;
  title_->setObjectName("routing_title");
  title_->setWordWrap(true);
  origin_ = new QLabel;
  origin_->setObjectName("routing_checkpoint");
  origin_->setWordWrap(true);
  origin_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  legend_ = new QLabel(
      "<small>Each number is the mean over the tokens of one read's weights α over its n sources: "
      "<i>norm. entropy</i> H / ln n (1: even over the sources, 0: one source), <i>eff. "
      "sources</i> exp(H), <i>top-1</i> the largest weight, <i>on emb</i> / <i>on recent</i> the "
      "weight on the embedding / on the most recent source (docs/interop.md, <tt>attnres "
      "inspect</tt>).</small>");
  legend_->setObjectName("routing_legend");
  legend_->setWordWrap(true);
  empty_ = new QLabel;
  empty_->setObjectName("routing_note");
  empty_->setWordWrap(true);
  empty_->setVisible(false);
  table_ = new QTableWidget;
  table_->setObjectName("routing_table");
  table_->setColumnCount(static_cast<int>(std::size(kColumns)));
  for (int c = 0; c < table_->columnCount(); ++c) {
    auto* header = new QTableWidgetItem(kColumns[c].header);
    header->setToolTip(kColumns[c].tip);
    table_->setHorizontalHeaderItem(c, header);
  }
  table_->verticalHeader()->setVisible(false);
  table_->verticalHeader()->setDefaultSectionSize(table_->fontMetrics().height() + 6);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setSelectionMode(QAbstractItemView::NoSelection);
  table_->setMinimumHeight(120);
  table_->setToolTip("Routing statistics of every read (attnres inspect --text prints the same)");
  chart_ = new ChartPanel;
  chart_->setObjectName("routing_chart");
  cosines_ = new HeatmapWidget;
  cosines_->setObjectName("query_cosines");
  auto* row = new QHBoxLayout;
  row->addWidget(chart_, 3);
  row->addWidget(cosines_, 2);
  column->addWidget(title_);
  column->addWidget(origin_);
  column->addWidget(legend_);
  column->addWidget(empty_);
  column->addWidget(table_, 4);
  column->addLayout(row, 5);
}

void RoutingPanel::set_result(RoutingResult result) {
  result_ = std::move(result);
  const RoutingResult& r = result_;
  title_->setText(QString("<b>Routing of %1</b> over %2 tokens (the first map of the page \"the "
                          "weights of every read\")")
                      .arg(QString::fromStdString(r.label).toHtmlEscaped())
                      .arg(r.tokens));
  origin_->setText(QString::fromStdString(r.origin));
  empty_->setText(QString::fromStdString(r.note));
  empty_->setVisible(!r.note.empty());
  table_->setRowCount(static_cast<int>(r.routing.size()));
  auto put = [this](int row, int col, const QString& text, double value, bool number) {
    auto* item = new QTableWidgetItem(text);
    if (number) {
      item->setData(Qt::UserRole, value);
      item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
    }
    table_->setItem(row, col, item);
    return item;
  };
  for (std::size_t i = 0; i < r.routing.size(); ++i) {
    const ReadRouting& x = r.routing[i];
    const int row = static_cast<int>(i);
    put(row, 0, QString::number(x.read), x.read, true);
    put(row, 1, QString::fromStdString(x.target), 0, false)
        ->setToolTip(QString::fromStdString(x.target));
    QStringList names;
    for (const auto& s : x.sources) names << QString::fromStdString(s);
    const auto n = static_cast<double>(x.sources.size());
    put(row, 2, QString::number(x.sources.size()), n, true)->setToolTip(names.join(", "));
    put(row, 3, fixed_or_dash(x.normalised_entropy, 3), x.normalised_entropy, true);
    put(row, 4, QString::number(x.effective_sources, 'f', 2), x.effective_sources, true);
    put(row, 5, QString::number(x.top1_mass, 'f', 3), x.top1_mass, true);
    put(row, 6, fixed_or_dash(x.embedding_weight, 3), x.embedding_weight, true);
    put(row, 7, QString::number(x.recent_weight, 'f', 3), x.recent_weight, true);
  }
  table_->resizeColumnsToContents();
  table_->horizontalHeader()->setSectionResizeMode(1, QHeaderView::Stretch);
  // As tall as its rows (up to 16 of them; more scroll): the charts get the rest.
  const int rows = std::min(16, std::max(1, table_->rowCount()));
  table_->setMaximumHeight(table_->horizontalHeader()->sizeHint().height() +
                           rows * table_->verticalHeader()->defaultSectionSize() +
                           2 * table_->frameWidth() + 2);
  table_->setVisible(!r.routing.empty());
  legend_->setVisible(!r.routing.empty());
  if (!r.routing.empty()) chart_->set_spec(routing_chart(r.routing, r.sublayers));
  chart_->setVisible(!r.routing.empty());
  if (r.cosines) cosines_->set_spec(query_cosine_heatmap(*r.cosines));
  cosines_->setVisible(r.cosines.has_value());
}

}  // namespace attnres::gui
